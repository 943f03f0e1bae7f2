"""README.md and docs/ stay true: links resolve, commands name real flags, examples run, tables match results."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def prose(text: str) -> str:
    """The page without its fenced code blocks (links and headings inside them are not links or headings)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@functools.cache
def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(prose(page.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z]+:", t)]


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in PAGES:
        for target in links(page):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no heading with that anchor)")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_reachable_from_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not orphans, f"docs pages the README's map does not link: {orphans}"


def test_readme_is_a_first_screen_not_a_manual():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
    first_screen = "\n".join(lines[:40])
    assert "exact" in first_screen and "make demo" in first_screen


@pytest.mark.slow
def test_generated_tables_match_the_result_files():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tables.py"), "--check"], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_a_table_edited_by_hand_is_caught(monkeypatch):
    """The check can fail: a figure typed into a generated block differs from what the JSON renders."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import tables

    page = "x\n<!-- table: reliability -->\n| 0.0% | 0% / 0% | auto | 0.001 |\n<!-- end table -->\n"
    text, changed = tables.render(page, README)
    assert changed == ["reliability"] and "packets sent per useful packet" in text and "0.001 |" not in text
    again, changed = tables.render(text, README)
    assert again == text and changed == []


@pytest.mark.slow
def test_python_examples_run(monkeypatch):
    """Every ```python block in README and docs/ runs as written, from the repository's root."""
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    blocks = [(page, code) for page in PAGES for lang, code in FENCE.findall(page.read_text()) if lang == "python"]
    assert blocks, "no python example in README or docs/"
    for page, code in blocks:
        exec(compile(code, str(page), "exec"), {})


# -- commands: every flag a page shows exists in that command's --help -------------------------------

def commands() -> list[tuple[Path, str]]:
    out = []
    for page in PAGES:
        for lang, code in FENCE.findall(page.read_text()):
            if lang not in ("sh", "bash"):
                continue
            for line in code.replace("\\\n", " ").splitlines():
                line = line.split(" #", 1)[0].strip()
                if line and not line.startswith("#"):
                    out.append((page, line))
    return out


def program(words: list[str]) -> tuple[tuple[str, ...], list[str]] | None:
    """(the command that prints the help, the words after it) for the commands this project ships."""
    while words and words[0] in ("sudo", "exec"):
        words = words[1:]
    if not words:
        return None
    head = words[0]
    if head.endswith("/hina") or head == "hina":
        return (sys.executable, "-m", "hina", words[1]), words[2:]
    if head.endswith("python") or head.endswith("python3"):
        if words[1] == "-m" and words[2] in ("hina.emulator", "hina"):
            return (sys.executable, "-m", words[2]), words[3:]
        if words[1] == "-m":
            return None  # pytest and friends
        if words[1].endswith(".py") and (ROOT / words[1]).exists():
            return (sys.executable, str(ROOT / words[1])), words[2:]
    return None


@functools.cache
def help_text(cmd: tuple[str, ...]) -> str:
    out = subprocess.run([*cmd, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, f"{' '.join(cmd)} --help failed: {out.stderr[-500:]}"
    return out.stdout


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


@pytest.mark.slow
def test_commands_in_readme_and_docs_name_real_targets_and_flags():
    checked, wrong = 0, []
    for page, line in commands():
        words = shlex.split(line)
        if words[0] == "make":
            missing = [w for w in words[1:] if "=" not in w and w not in make_targets()]
            wrong += [f"{page.relative_to(ROOT)}: make {w}: no such target" for w in missing]
            checked += 1
            continue
        found = program(words)
        if found is None:
            continue
        cmd, rest = found
        text = help_text(cmd)
        for flag in (w.split("=", 1)[0] for w in rest if w.startswith("--")):
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text):
                wrong.append(f"{page.relative_to(ROOT)}: `{line}`: {flag} is not in `{' '.join(cmd[1:])} --help`")
        checked += 1
    assert checked >= 10, f"only {checked} commands found in README and docs/"
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("heading, want", [
    ("The main job: `make demo`", "the-main-job-make-demo"),
    ("Where this departs from DESIGN.md section 2", "where-this-departs-from-designmd-section-2"),
    ("`hina worker` against a running switch", "hina-worker-against-a-running-switch"),
])
def test_anchors_are_githubs(heading, want):
    assert slug(heading) == want


@pytest.mark.slow
def test_the_campaign_runs_real_scripts_with_real_flags_and_writes_where_the_tables_read(monkeypatch):
    """tools/campaign.py re-measures every figure: each step's script exists and takes each flag the
    step passes, and every result file a generated table reads is one the campaign writes (or a result
    no campaign step produces: the codec, GPU and training runs, listed here)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import campaign
    import tables

    wrong, written = [], set()
    for step in campaign.steps():
        found = program(["python", *step.args])
        assert found is not None, f"{step.name}: {step.args[0]} is not a script of this checkout"
        cmd, rest = found
        text = help_text(cmd)
        wrong += [f"{step.name}: {flag} is not in `{step.args[0]} --help`"
                  for flag in (w for w in rest if w.startswith("--")) if not re.search(
                      rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text)]
        written.update(step.outputs)
    assert not wrong, "\n".join(wrong)
    assert len({s.name for s in campaign.steps()}) == len(campaign.steps()), "two steps share a name"
    read = set()
    monkeypatch.setattr(tables, "load", lambda name, _load=tables.load: read.add(name) or _load(name))
    for fn in tables.TABLES.values():
        fn()
    not_campaign = {"compare.json", "codec_bench.json", "codec_bench_numba_2e25.json", "codec_bench_torch_cpu.json",
                    "codec_bench_numba_2e22.json", "codec_bench_torch_cpu_2e25.json", "capture_torch.json"}
    stray = sorted(name for name in read - not_campaign if f"benchmarks/results/{name}" not in written)
    assert not stray, f"tables read results no campaign step writes: {stray}"


def test_provenance_calls_a_checkout_dirty_for_code_not_for_results_or_pages(tmp_path, monkeypatch):
    """A result's meta says 'with uncommitted changes' when the code that measured it differs from its commit;
    the result files and the pages a campaign rewrites as it goes do not count."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from hina import provenance

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    for rel in ("codec/x.py", "benchmarks/results/r.json", "docs/p.md", "README.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("0\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    for rel in ("benchmarks/results/r.json", "docs/p.md", "README.md"):
        (tmp_path / rel).write_text("1\n")
    head, dirty = provenance.commit()
    assert head and not dirty
    (tmp_path / "codec/x.py").write_text("1\n")
    assert provenance.commit() == (head, True)
