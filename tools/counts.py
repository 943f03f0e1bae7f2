"""The repository's size in numbers: Python files and lines by folder, and every function longer than a
reader keeps in view (80 lines by default), longest first; of the working tree's tracked files, or of any
commit's.

    python tools/counts.py                 # the checkout as it is now (tracked files)
    python tools/counts.py --rev ad2a84d   # a commit's tree, for a before and after
    python tools/counts.py --over 60       # a lower bar

A function's length runs from its `def` line to its last line, its docstring and nested functions
included (a nested function is listed on its own as well).  Nothing is run or imported: the files are
parsed as text.  docs/contributing.md quotes what this prints, with the command.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Function:
    lines: int
    path: str
    line: int
    name: str


def python_files(rev: str | None) -> dict[str, str]:
    """Every tracked Python file's text: of the working tree, or of commit `rev`."""
    if rev is None:
        names = git("ls-files", "-z", "--", "*.py").split("\0")
        return {n: (ROOT / n).read_text() for n in names if n and (ROOT / n).is_file()
                and not (ROOT / n).is_symlink()}
    listing = git("ls-tree", "-r", "-z", rev).split("\0")
    blobs = [entry.split("\t", 1) for entry in listing if entry]
    names = [name for meta, name in blobs if name.endswith(".py") and meta.split()[0] == "100644"]
    return {n: git("show", f"{rev}:{n}") for n in names}


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if done.returncode:
        raise ValueError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"git {args[0]} failed")
    return done.stdout


def functions(path: str, text: str) -> list[Function]:
    """Every function and method defined in `text`, nested ones too, with its length in lines."""
    return [Function(node.end_lineno - node.lineno + 1, path, node.lineno, node.name)
            for node in ast.walk(ast.parse(text, path))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def folder(path: str) -> str:
    return path.split("/", 1)[0] if "/" in path else "."


def report(files: dict[str, str], over: int) -> list[str]:
    """The table of folders, then the functions over `over` lines."""
    by_folder: dict[str, list[int]] = {}
    long: list[Function] = []
    for path, text in sorted(files.items()):
        found = functions(path, text)
        row = by_folder.setdefault(folder(path), [0, 0, 0, 0])
        row[0] += 1
        row[1] += len(text.splitlines())
        row[2] += len(found)
        row[3] += sum(f.lines > over for f in found)
        long += [f for f in found if f.lines > over]
    total = [sum(col) for col in zip(*by_folder.values())] if by_folder else [0, 0, 0, 0]
    out = [f"{'folder':<16} {'files':>6} {'lines':>8} {'functions':>10} {'over ' + str(over):>8}"]
    out += [f"{name:<16} {files:>6,} {lines:>8,} {defs:>10,} {longer:>8,}"
            for name, (files, lines, defs, longer) in [*sorted(by_folder.items()), ("all", total)]]
    out.append("")
    out.append(f"functions over {over} lines, longest first:")
    out += [f"{f.lines:>5} {f.path}:{f.line} {f.name}"
            for f in sorted(long, key=lambda f: (-f.lines, f.path, f.line))] or ["    (none)"]
    return out


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/counts.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="a commit to count instead of the working tree")
    ap.add_argument("--over", type=positive, default=80, help="list the functions longer than this (default: 80)")
    args = ap.parse_args(argv)
    try:
        files = python_files(args.rev)
        lines = report(files, args.over)
    except (ValueError, SyntaxError, OSError) as exc:
        print(f"tools/counts.py: {exc}", file=sys.stderr)
        return 2
    print(f"Python files of {args.rev or 'the working tree'} (tracked), by top folder:")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
