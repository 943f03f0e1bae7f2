"""The repository's shape holds: the import layers of docs/contributing.md (tools/ at the top, above the
package), no import circles, no edits of Python's import path, and a wheel that puts only `hina` at the top
of site-packages."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder -> the subpackage of `hina` it is (pyproject.toml's package-dir)
FOLDERS = {"codec": "hina.codec", "wire": "hina.wire", "control": "hina.control", "switch_emulator": "hina.emulator",
           "host": "hina.host", "baselines": "hina.baselines", "sim": "hina.sim", "mininet": "hina.mininet",
           "benchmarks": "hina.benchmarks"}
# tools/ is not a package: its scripts run as `python tools/NAME.py` and import each other by bare name
# (`import campaign`), which is how they are found here too ("tools.campaign")
TOOLS = "tools"
# Who may import whom: a module imports only from lower layers and its own package (docs/contributing.md).
LAYERS = [
    {"hina.cliargs", "hina.provenance", "hina.progress"},
    {"hina.kernels"},
    {"hina.codec"},
    {"hina.wire"},
    {"hina.control"},
    {"hina.emulator", "hina.host"},
    {"hina.sim", "hina.baselines"},
    {"hina.mininet"},
    {"hina.benchmarks"},
    {"hina", "hina.__main__"},
    {TOOLS},
]
LAYER = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def modules() -> dict[str, Path]:
    found = {}
    for folder, pkg in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):  # a subpackage's modules too (hina.emulator.xdp)
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if ".venv" in parts or "__pycache__" in parts or (folder == "mininet" and len(parts) > 1):
                continue
            name = ".".join((pkg, *parts))
            found[name.removesuffix(".__init__")] = path
    for path in sorted((ROOT / "hina").glob("*.py")):
        found["hina" if path.stem == "__init__" else f"hina.{path.stem}"] = path
    for path in sorted((ROOT / TOOLS).glob("*.py")):
        found[f"{TOOLS}.{path.stem}"] = path
    return found


MODULES = modules()


def imports(name: str, path: Path, top_level_only: bool = False) -> set[str]:
    """The hina modules `name` imports (a `from X import Y` counts as X.Y where that is a module)."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
    return {m if m in MODULES else f"{TOOLS}.{m}" for m in found if m in MODULES or f"{TOOLS}.{m}" in MODULES}


def package_of(module: str) -> str:
    """The layered package a module belongs to: itself, or the nearest package above it that has a layer (a
    subpackage is part of its package: hina.emulator.xdp of hina.emulator)."""
    name = module
    while name and name not in LAYER:
        name = name.rpartition(".")[0]
    return name or module


def test_every_package_has_a_layer():
    assert {package_of(m) for m in MODULES} <= set(LAYER), {package_of(m) for m in MODULES} - set(LAYER)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module):
    own = package_of(module)
    wrong = sorted(m for m in imports(module, MODULES[module])
                   if package_of(m) != own and LAYER[package_of(m)] >= LAYER[own])
    assert not wrong, f"{module} (layer {LAYER[own]}) imports {wrong}: a module imports only from lower layers"


def lazy_exports(name: str, path: Path) -> set[str]:
    """The modules a package's __init__ loads on first use (PEP 562): the keys of its `_EXPORTS` table
    ("module" within the package, or "hina.package" from the front door)."""
    if path.stem != "__init__":
        return set()
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_EXPORTS" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
            return {k if "." in k else f"{name}.{k}" for k in keys} & set(MODULES)
    return set()


def import_graph() -> dict[str, set[str]]:
    """Every module's imports (inside functions too: they hide a circle, they do not break it), a package's
    __init__ included, with the modules its `__getattr__` loads on first use."""
    return {m: (imports(m, p) | lazy_exports(m, p)) - {m} for m, p in MODULES.items()}


def circles_in(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles():
    """Between modules, through a package's __init__ too: a module that imports its package's names
    (`from hina.host import Worker` in host/job.py) runs that __init__, and whatever it loads, eagerly or
    on first use, must not need the module back."""
    circles = circles_in(import_graph())
    assert not circles, circles


def test_a_circle_through_a_packages_init_is_found():
    """The mutation the rule exists for: host/job.py importing the package's Worker (host/__init__ loads
    agent, which imports job) is a circle; so is an eager one."""
    graph = import_graph()
    graph["hina.host.job"] = graph["hina.host.job"] | {"hina.host"}
    assert any({"hina.host", "hina.host.job", "hina.host.agent"} <= set(c) for c in circles_in(graph))


PATH_LISTS = {"path", "meta_path", "path_hooks"}  # sys's lists that decide where an import is found


def _is_sys(node: ast.expr, names: set[str]) -> bool:
    """`sys` by any name this module gave it, or `__import__("sys")` / `importlib.import_module("sys")`."""
    if isinstance(node, ast.Name):
        return node.id in names
    return (isinstance(node, ast.Call) and bool(node.args) and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "sys" and (getattr(node.func, "id", "") == "__import__"
                                                 or getattr(node.func, "attr", "") == "import_module"))


def path_edits(source: str) -> list[int]:
    """The lines of `source` that can change where Python finds modules: sys.path and its siblings reached
    through `sys` under any name, taken out of sys by `from sys import ...`, or `site.addsitedir`."""
    tree = ast.parse(source)
    sys_names = {"sys"} | {a.asname for n in ast.walk(tree) if isinstance(n, ast.Import)
                           for a in n.names if a.name == "sys" and a.asname}
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("sys", "site") and not node.level:
            if any(a.name in (*PATH_LISTS, "addsitedir", "*") for a in node.names):
                lines.add(node.lineno)
        elif isinstance(node, ast.Attribute):
            if node.attr == "addsitedir" or (node.attr in PATH_LISTS and _is_sys(node.value, sys_names)):
                lines.add(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize("source", [
    "import sys\nsys.path.insert(0, 'x')\n",
    "from sys import path\npath.insert(0, 'x')\n",
    "from sys import path as p\np.append('x')\n",
    "import sys as s\ns.path.append('x')\n",
    "import os, sys as system\nsystem.meta_path.insert(0, object())\n",
    "__import__('sys').path.append('x')\n",
    "import site\nsite.addsitedir('x')\n",
    "from site import addsitedir\naddsitedir('x')\n",
    "def f():\n    import sys as _s\n    _s.path[:0] = ['x']\n",
], ids=["sys.path", "from sys import path", "from sys import path as p", "import sys as s", "meta_path",
        "__import__", "site.addsitedir", "from site import addsitedir", "inside a function"])
def test_every_way_to_edit_the_import_path_is_found(source):
    assert path_edits(source), source


def test_what_only_looks_like_a_path_edit_is_not_one():
    source = ("import os, sys\nfrom pathlib import Path\nroot = Path(__file__).parent\nos.path.join('a', 'b')\n"
              "print(sys.argv, sys.executable)\ns = Path('x')\ns.parent\nfrom os import path\npath.join('a')\n")
    assert path_edits(source) == []


def test_the_import_path_is_edited_only_in_the_tests_conftest():
    edits = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in (".venv", "build", ".git") or rel.parts[:2] == ("hina", "mininet") or \
                path == ROOT / "tests" / "conftest.py":  # hina/mininet is a link to mininet/, read there
            continue
        edits += [f"{rel}:{line}" for line in path_edits(path.read_text())]
    assert not edits, edits


@pytest.mark.slow
def test_the_wheel_holds_hina_alone_at_the_top(tmp_path):
    """The wheel CI installs: one top-level package, with every subpackage (the Mininet one included)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("hina-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"hina"}, top
    for pkg in FOLDERS.values():
        sub = pkg.replace(".", "/")
        assert any(n.startswith(sub + "/") for n in names), f"{pkg} is missing from the wheel"
    assert "hina/wire/headers.py" in names and "hina/mininet/hina_net.py" in names


@pytest.mark.slow
def test_the_front_doors_examples_run():
    """`help(hina)` opens on two examples (the codec alone; four workers through the emulator): they run."""
    import doctest

    import hina

    failures, tried = doctest.testmod(hina, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried >= 10 and failures == 0


def test_the_front_door_names_what_it_exports():
    import pydoc

    import hina

    for name in hina._WHERE:
        assert getattr(hina, name) is not None, name
        value = getattr(hina, name)
        if isinstance(value, type):  # every exported class says what it is
            assert value.__doc__ and not value.__doc__.startswith(f"{name}("), f"{name} has no docstring"
    assert {"codec", "wire", "control", "emulator", "host", "sim"} <= set(dir(hina))
    # help(hina) is a page, not every class's every method: the docstring names each export once
    index = hina.__doc__.split("The names at the top")[1]
    assert set(re.findall(r"`(\w+)`", index)) - {"import", "hina", "help"} == set(hina._WHERE)
    assert len(hina.__doc__.splitlines()) < 120
    # help(hina) documents what __all__ names (`from hina import *`), torch's names aside
    page = pydoc.render_doc(hina, renderer=pydoc.plaintext)
    assert "class Worker" in page and "class SwitchAllreduce" not in page


# Words that cite the work that led to a change instead of saying what the code does or why: an issue or a task
# by number, or named as the one at hand (WORK_ITEM spells out which phrases; the examples below are written in
# pieces, so that this file passes its own check).
WORK_ITEM = re.compile(r"\b(?:issue\s*#?\s*\d+|task\s*#?\s*\d+|the\s+issue\b|issue'?s\s+(?:rule|run|case|repro)"
                       r"|this\s+task\b|work\s+item)", re.I)
WORDS_IN = ("*.py", "*.md", "*.p4", "*.sh", "*.lua", "*.toml", "Makefile")
NOT_OURS = (".venv", "build", ".git", "hina.egg-info")


def work_item_words(text: str) -> list[str]:
    return [m.group(0) for m in WORK_ITEM.finditer(text)]


def test_code_tests_and_docs_say_what_and_why_not_which_work_item():
    found = []
    for pattern in WORDS_IN:
        for path in ROOT.rglob(pattern):
            rel = path.relative_to(ROOT)
            if rel.parts[0] in NOT_OURS or rel.parts[:2] in (("hina", "mininet"), ("benchmarks", "results")):
                continue
            found += [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
                      for text in [path.read_text(errors="replace")] for m in WORK_ITEM.finditer(text)]
    assert not found, found


@pytest.mark.parametrize("pieces", [("Issue", "15 asks whether"), ("see issue", "#53"), ("The", "issue's", "rule"),
                                    ("task", "7"), ("As this", "task"), ("the", "issue's", "run"), ("ISSUE", "3")])
def test_work_item_words_are_found(pieces):
    text = " ".join(pieces)
    assert work_item_words(text), text


def test_words_that_only_look_like_work_items_are_not():
    assert not work_item_words("a task queue of 4 tasks; issue a join; issued 3 joins; /proc/1/task/1/children")
