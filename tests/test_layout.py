"""The repository's shape holds: the import layers of docs/contributing.md, no import circles, no sys.path
edits, and a wheel that puts only `hina` at the top of site-packages."""

from __future__ import annotations

import ast
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
]
LAYER = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def modules() -> dict[str, Path]:
    found = {}
    for folder, pkg in FOLDERS.items():
        for path in sorted((ROOT / folder).glob("*.py")):
            found[pkg if path.stem == "__init__" else f"{pkg}.{path.stem}"] = path
    for path in sorted((ROOT / "hina").glob("*.py")):
        found["hina" if path.stem == "__init__" else f"hina.{path.stem}"] = path
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
    return {m for m in found if m in MODULES}


def package_of(module: str) -> str:
    if module in LAYER:
        return module
    return module.rpartition(".")[0] if module.rpartition(".")[0] in LAYER else module


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


def test_sys_path_is_edited_only_in_the_tests_conftest():
    edits = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in (".venv", "build", ".git") or rel.parts[:2] == ("hina", "mininet") or \
                path == ROOT / "tests" / "conftest.py":  # hina/mininet is a link to mininet/, read there
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
                edits.append(f"{rel}:{node.lineno}")
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
    import re

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
