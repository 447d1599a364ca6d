"""Runs the README's examples against a live daemon.

Every ```sh block in README.md whose commands talk to http://127.0.0.1:8080
is run (with the daemon's real port substituted). When the block is followed
by an ```output block, the command's stdout must match it: JSON outputs are
compared as JSON with the "metrics" object ignored (its timings vary), other
outputs line by line.
"""
import json
import os
import re
import subprocess
import unittest

from test_http import Daemon

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def examples():
    text = open(README, encoding="utf-8").read()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    out = []
    for i, (lang, body) in enumerate(blocks):
        if lang == "sh" and "127.0.0.1:8080" in body:
            expect = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "output" else None
            out.append((body, expect))
    return out


def without_metrics(doc):
    if isinstance(doc, dict):
        return {k: without_metrics(v) for k, v in doc.items() if k != "metrics"}
    return doc


class Readme(unittest.TestCase):
    def test_examples(self):
        ex = examples()
        self.assertGreaterEqual(len(ex), 3, "the README shows curl examples for each format")
        d = Daemon()
        try:
            for cmd, expect in ex:
                cmd = cmd.replace("127.0.0.1:8080", f"127.0.0.1:{d.port}")
                # A new shell on Debian: only the standard PATH (Debian's python3 with
                # python3-numpy) and HOME, none of this machine's settings (such as
                # PYTHONUNBUFFERED, which hides a pipe error numpy.save can hit).
                env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], capture_output=True, timeout=60,
                                   cwd=os.path.dirname(README), env=env)
                self.assertEqual(r.returncode, 0, (cmd, r.stderr.decode()))
                if expect is None:
                    continue
                got = r.stdout.decode()
                try:
                    self.assertEqual(without_metrics(json.loads(got)), without_metrics(json.loads(expect)), cmd)
                except json.JSONDecodeError:
                    self.assertEqual(got.strip().splitlines(), expect.strip().splitlines(), cmd)
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
