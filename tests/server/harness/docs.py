"""The documentation (README.md and docs/*.md) whose examples the tests run."""
import os
import re

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def doc_files():
    """The documentation whose examples the tests run: README.md, then every docs/*.md."""
    docs = os.path.join(REPO, "docs")
    return [os.path.join(REPO, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def doc_text():
    """README.md and docs/*.md, one after the other."""
    text = []
    for path in doc_files():
        with open(path, encoding="utf-8") as f:
            text.append(f.read())
    return "\n".join(text)


def readme_python_output(marker, port, grpc_port=None):
    """Runs the one ```python example of README.md and docs/*.md containing `marker` against a
    daemon on `port` (and `grpc_port`, for the examples' gRPC address 127.0.0.1:8081); returns
    (what it printed, the ```output block shown after it)."""
    import contextlib
    import io
    blocks = re.findall(r"```python\n(.*?)```\n```output\n(.*?)```", doc_text(), re.S)
    snippets = [(code, out) for code, out in blocks if marker in code]
    if len(snippets) != 1:
        raise AssertionError(f"{len(snippets)} python examples of README.md and docs/ contain {marker!r}")
    code, expected = snippets[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = code.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
        if grpc_port is not None:
            code = code.replace("127.0.0.1:8081", f"127.0.0.1:{grpc_port}")
        exec(code, {})
    return out.getvalue().strip(), expected.strip()
