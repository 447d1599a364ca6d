"""mhd_framing.py - the project's HTTP/1.1 framing table sent to a server, and what it answers.

Every row of tests/server/test_framing.py (REFUSED: requests tiled refuses; ACCEPTED: requests
it serves) goes on a connection of its own, followed by a probe request, to a server already
listening on 127.0.0.1:PORT; each row is classed by what came back:

  same      refused rows: the table's status, and nothing after it (the probe unanswered);
            accepted rows: two answers, the row's 2xx and the probe's
  other     refused with another 4xx/5xx status, nothing after it
  JSON      (counted apart) the refusal came as tiled's JSON error
  desync    a refused row answered 2xx, or more answers than the row allows (a smuggled or
            probe request was served): the class strict framing exists to prevent
  silent    no answer at all before the server closed or the read timed out
  refused   an accepted row refused

It measures the library alone (bench/mhd_floor.c, any libmicrohttpd version and discipline
level) against the same table tiled passes, e.g.

    build/bench/mhd_floor 18400 2 &  python3 bench/mhd_framing.py 18400

and prints one line per row that is not "same", then the counts.
"""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
import test_framing  # noqa: E402  (its tables only)

TIMEOUT = 1.0  # a keep-alive server that says nothing more within it is done


def answers(port, raw):
    """[(status, headers)] of every response to raw + a probe, until the server closes."""
    probe = b"GET /probe HTTP/1.1\r\nHost: t\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    try:
        try:
            s.sendall(raw + probe)
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = test_framing.Responses(s)
        out = []
        while True:
            try:
                a = r.next()
            except (socket.timeout, ConnectionResetError):
                break
            if a is None:
                break
            out.append((a[0], a[1]))
        return out
    finally:
        s.close()


def classify(rows_answers, status, accepted):
    if not rows_answers:
        return "silent"
    first = rows_answers[0][0]
    if accepted:
        return "same" if len(rows_answers) == 2 and 200 <= first < 300 else "refused"
    if 200 <= first < 300 or len(rows_answers) > 1:
        return "desync"
    return "same" if first == status else "other"


def main():
    port = int(sys.argv[1])
    counts, json_errors = {}, 0
    rows = [(n, raw, st, False) for n, raw, st, _ in test_framing.REFUSED] + \
           [(n, raw, st, True) for n, raw, st in test_framing.ACCEPTED]
    for name, raw, status, accepted in rows:
        got = answers(port, raw)
        cls = classify(got, status, accepted)
        counts[cls] = counts.get(cls, 0) + 1
        if got and not accepted and got[0][0] >= 400 and \
                got[0][1].get("content-type", "").startswith("application/json"):
            json_errors += 1
        if cls != "same":
            print(f"{cls:8s} {name:34s} table {status}, answered {[a[0] for a in got]}")
    total = sum(counts.values())
    print("rows: %d; " % total + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; refusals with a JSON error: {json_errors}")


if __name__ == "__main__":
    main()
