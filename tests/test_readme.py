"""The README's code examples run as written (so the README stays true)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_python_examples_run(monkeypatch):
    monkeypatch.chdir(README.parent)  # the examples say: run from the repository's root
    monkeypatch.syspath_prepend(str(README.parent))
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
