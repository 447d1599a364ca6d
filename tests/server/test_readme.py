"""Runs the examples of README.md and docs/*.md against a live daemon, and checks their links.

Every ```sh block in README.md and docs/*.md whose commands talk to
http://127.0.0.1:8080 is run (with the daemon's real port substituted). When
the block is followed by an ```output block, the command's stdout must match
it: JSON outputs are compared as JSON with the "metrics" object ignored (its
timings vary), other outputs line by line. The ```python examples are run by
the client suites (test_tritonclient, test_kserve, test_grpc, test_shared_memory)
through harness.docs.readme_python_output, over the same files.

Every relative link of those files ([text](path#anchor), images too) must name
a file or folder of the repository and, for a Markdown file, an anchor one of
its headings makes (GitHub's rule).

A performance figure (a number in GB/s, req/s, instructions or x nginx) appears in
docs/performance.md only, with its date and command; the other pages link there.
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

from harness.daemon import Daemon
from harness.docs import REPO, doc_files


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def examples(path):
    text = read(path)
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


def prose(text):
    """The text with fenced blocks and code spans blanked (lines kept, so that line numbers stay
    true): links are not read inside code."""
    text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "``", text)


def slug(heading):
    """GitHub's anchor for a heading: lower case, Markdown marks and punctuation dropped
    (hyphens and underscores kept), spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """Every anchor of a Markdown file: its headings' slugs, repeats numbered as GitHub does."""
    seen, out = {}, set()
    headings = re.sub(r"^```.*?^```", "", read(path), flags=re.S | re.M)
    for m in re.finditer(r"^#{1,6} +(.*?) *#*$", headings, re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def link_problems(paths, root):
    """(links checked, what is wrong with each broken one) for the Markdown files `paths`."""
    checked, problems = 0, []
    for path in paths:
        for line, target in local_links(path):
            checked += 1
            where = f"{os.path.relpath(path, root)}:{line}: {target}"
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if dest != root and not dest.startswith(root + os.sep):
                problems.append(f"{where}: outside the repository")
            elif not os.path.exists(dest):
                problems.append(f"{where}: no such file")
            elif anchor and (not dest.endswith(".md") or anchor not in anchors(dest)):
                problems.append(f"{where}: no such heading")
    return checked, problems


def local_links(path):
    """(line number, target) of every relative link and image in a Markdown file."""
    text = prose(read(path))
    for m in re.finditer(r"!?\[[^\]\n]*\]\(([^)\s]+)(?: \"[^\"]*\")?\)", text):
        target = m.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto: ...
        yield text.count("\n", 0, m.start()) + 1, target


class Readme(unittest.TestCase):
    def test_docs_are_in_place(self):
        names = [os.path.relpath(p, REPO) for p in doc_files()]
        for want in ("README.md", "docs/protocols.md", "docs/performance.md", "docs/deployment.md",
                     "docs/operations.md", "docs/security.md", "docs/reliability.md", "docs/architecture.md"):
            self.assertIn(want, names)

    def test_examples(self):
        ex = [(path, cmd, expect) for path in doc_files() for cmd, expect in examples(path)]
        self.assertGreaterEqual(len(ex), 3, "the README and docs/ show curl examples for each format")
        self.assertTrue(examples(doc_files()[0]), "the README shows a curl example")
        d = Daemon()
        try:
            for path, cmd, expect in ex:
                where = os.path.relpath(path, REPO)
                cmd = cmd.replace("127.0.0.1:8080", f"127.0.0.1:{d.port}")
                # A new shell on Debian: only the standard PATH (Debian's python3 with
                # python3-numpy) and HOME, none of this machine's settings (such as
                # PYTHONUNBUFFERED, which hides a pipe error numpy.save can hit).
                env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], capture_output=True, timeout=60,
                                   cwd=REPO, env=env)
                self.assertEqual(r.returncode, 0, (where, cmd, r.stderr.decode()))
                if expect is None:
                    continue
                got = r.stdout.decode()
                try:
                    self.assertEqual(without_metrics(json.loads(got)), without_metrics(json.loads(expect)),
                                     (where, cmd))
                except json.JSONDecodeError:
                    self.assertEqual(got.strip().splitlines(), expect.strip().splitlines(), (where, cmd))
        finally:
            self.assertEqual(d.stop(), 0)

    def test_local_links_resolve(self):
        checked, problems = link_problems(doc_files(), REPO)
        self.assertEqual(problems, [])
        self.assertGreaterEqual(checked, 20, "the README links docs/, and docs/ each other")

    def test_link_check_finds_broken_links(self):
        """The checker itself, on files made for it: a missing file, a missing anchor (of another
        file and of its own), a link out of the tree are reported; links in code are not read."""
        with tempfile.TemporaryDirectory() as root:
            with open(os.path.join(root, "a.md"), "w", encoding="utf-8") as f:
                f.write("# Top\n\n[ok](b.md#open-inference-protocol-kserve-v2) [ok](#top) [ok](b.md)"
                        " ![ok](b.md)\n[gone](missing.md) [bad anchor](b.md#nope)\n"
                        "[own](#bottom) [out](../x) `[code](nowhere.md)`\n```\n[fence](gone.md)\n```\n")
            with open(os.path.join(root, "b.md"), "w", encoding="utf-8") as f:
                f.write("# Open Inference Protocol (KServe v2)\n")
            checked, problems = link_problems([os.path.join(root, "a.md")], root)
        self.assertEqual(checked, 8)
        self.assertEqual(problems, ["a.md:4: missing.md: no such file", "a.md:4: b.md#nope: no such heading",
                                    "a.md:5: #bottom: no such heading", "a.md:5: ../x: outside the repository"])

    def test_slugs_follow_github(self):
        self.assertEqual(slug("/v1: raw binary and .npy"), "v1-raw-binary-and-npy")
        self.assertEqual(slug("perf_analyzer"), "perf_analyzer")
        self.assertEqual(slug("What the deployment tests verify (`make deploy-test`, part of `make test`)"),
                         "what-the-deployment-tests-verify-make-deploy-test-part-of-make-test")


# A performance figure: a number with a unit of throughput (GB/s, req/s, 12k req/s, infer/s),
# a count of instructions, or a ratio to nginx. docs/performance.md holds each one with its date
# and the command that made it; the README and the other pages link there, so that a new
# measurement changes one place and no page keeps an old figure.
FIGURE = re.compile(r"(?<![\w.])\d[\d,.]*(?:(?:\s*k)?\s*(?:(?:req|requests|infer|inferences|calls)/s|[KMGT]i?B/s)"
                    r"(?!\w)|\s+instructions\b|x\s+(?:of\s+)?nginx\b)", re.I)
# Figures with those units allowed elsewhere, as "path: figure" (none today; a number that only
# looks like one, such as a limit in a unit of throughput, would be listed here with its reason).
FIGURES_ALLOWED = set()


def figures_outside_performance(paths, root):
    """["path:line: figure"] for each performance figure of `paths` outside docs/performance.md."""
    found = []
    for path in paths:
        rel = os.path.relpath(path, root)
        if rel == os.path.join("docs", "performance.md"):
            continue
        text = read(path)
        for m in FIGURE.finditer(text):
            figure = " ".join(m.group(0).split())
            if f"{rel}: {figure}" not in FIGURES_ALLOWED:
                found.append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {figure}")
    return found


class Figures(unittest.TestCase):
    def test_performance_figures_only_in_performance_md(self):
        self.assertEqual(figures_outside_performance(doc_files(), REPO), [],
                         "move each figure to docs/performance.md (with its date and command) and link to it")
        self.assertGreater(len(FIGURE.findall(read(os.path.join(REPO, "docs", "performance.md")))), 20)

    def test_what_counts_as_a_figure(self):
        for figure in ("21,324 req/s", "11k req/s", "12 k req/s", "5,546 infer/s", "1.91 GB/s", "231 MiB/s",
                       "64,830 instructions", "0.49-0.66x nginx", "1.25x of nginx"):
            self.assertTrue(FIGURE.search(f"runs at {figure} here"), figure)
        for other in ("500 bytes/s", "(1,607/s)", "143 KB, 21 KB on the wire", "30 s", "2 ms", "x86 instructions",
                      "nginx `return 200`", "4 minutes"):
            self.assertIsNone(FIGURE.search(other), other)


class Architecture(unittest.TestCase):
    def test_the_picture_names_every_module(self):
        """docs/architecture.md's picture names every source module of core/, api/,
        cli/ and server/, so a newcomer finds each room from it."""
        text = read(os.path.join(REPO, "docs", "architecture.md"))
        picture = re.search(r"```\n(  cli/.*?)```", text, re.S).group(1)
        named = set(re.findall(r"[\w]+\.[ch]\b", picture))
        missing = []
        for layer in ("core", "api", "cli", "server"):
            for d, _, names in os.walk(os.path.join(REPO, layer)):
                for n in names:
                    if n.endswith(".c") or (n.endswith(".h") and not os.path.exists(os.path.join(d, n[:-2] + ".c"))
                                            and n in ("list.h",)):
                        if n not in named:
                            missing.append(os.path.relpath(os.path.join(d, n), REPO))
        self.assertEqual(missing, [], "modules the architecture picture does not name")


if __name__ == "__main__":
    unittest.main()
