"""tools/counts.py: the numbers docs/contributing.md quotes (Python files, lines, the functions over a length),
counted from the files' text, of the working tree or of a commit."""

from __future__ import annotations

import subprocess

import counts  # tools/, on the path by tests/conftest.py
import pytest


def function_of(lines: int, name: str = "f") -> str:
    """A function `lines` long from its def to its last line."""
    return f"def {name}():\n" + "    x = 1\n" * (lines - 2) + "    return x\n"


def test_a_function_over_the_bar_is_listed_and_one_at_it_is_not():
    text = function_of(81, "long") + "\n\n" + function_of(80, "exactly") + "\n\nclass C:\n" + \
        "\n".join("    " + line for line in function_of(90, "method").splitlines()) + "\n"
    found = {f.name: f.lines for f in counts.functions("m.py", text)}
    assert found == {"long": 81, "exactly": 80, "method": 90}
    out = counts.report({"pkg/m.py": text, "pkg/n.py": "x = 1\n", "tests/t.py": function_of(3)}, over=80)
    assert out[1].split() == ["pkg", "2", str(len(text.splitlines()) + 1), "3", "2"]
    assert out[2].split() == ["tests", "1", "3", "1", "0"]
    assert out[3].split()[0] == "all" and out[3].split()[1:] == ["3", str(len(text.splitlines()) + 4), "4", "2"]
    assert out[-2:] == ["   90 pkg/m.py:167 method", "   81 pkg/m.py:1 long"]


def test_a_nested_function_counts_on_its_own_too():
    inner = "\n".join("    " + line for line in function_of(85, "inner").splitlines())
    text = "def outer():\n" + inner + "\n    return inner\n"
    assert sorted((f.name, f.lines) for f in counts.functions("m.py", text)) == [("inner", 85), ("outer", 87)]


def test_a_commit_is_counted_from_its_tree():
    head = subprocess.run(["git", "-C", str(counts.ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        pytest.skip("not a git checkout")
    files = counts.python_files(head.stdout.strip())
    assert "tools/tables.py" in files and "hina/__init__.py" in files
    assert all(name.endswith(".py") for name in files)
    assert files["tools/tables.py"] == subprocess.run(["git", "-C", str(counts.ROOT), "show", "HEAD:tools/tables.py"],
                                                      capture_output=True, text=True).stdout


def test_a_bad_commit_or_bar_is_one_line_and_status_2(capsys):
    assert counts.main(["--rev", "no-such-commit"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tools/counts.py: ") and err.count("\n") == 1 and "no-such-commit" in err, err
    with pytest.raises(SystemExit) as bad:
        counts.main(["--over", "0"])
    assert bad.value.code == 2
    assert "--over: must be 1 or more, got 0" in capsys.readouterr().err
