"""The corpus comes from where the user's pip looks (its index, extra indexes and find-links: a mirror, a proxy,
an offline wheelhouse), not from a URL of its own, and only with the pinned sha256."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hina.host import corpus

ROOT = Path(__file__).resolve().parents[2]
CACHED = corpus.default_source()  # the archive `make install` fetched, where this machine has it


def simple_index(root: Path, archive: Path) -> str:
    """A PEP 503 index holding one project page that links to `archive`: its file:// URL."""
    page = root / "simple" / corpus.PROJECT
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<html><body><a href="{archive.as_uri()}#sha256=0">{corpus.ARCHIVE}</a>'
                                     f"</body></html>")
    return (root / "simple").as_uri()


def fetch_with_pip_config(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """`python -m hina.host.corpus fetch` with pip configured by these $PIP_ variables alone (no config files)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    clean.update(PIP_CONFIG_FILE=os.devnull, HINA_CORPUS=str(tmp_path / "out" / corpus.ARCHIVE), **env)
    return subprocess.run([sys.executable, "-m", "hina.host.corpus", "fetch"], capture_output=True, text=True,
                          env=clean, timeout=300, cwd=tmp_path)


def test_pips_configuration_names_the_sources(monkeypatch):
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    assert corpus.pip_sources() == corpus.Sources()  # nothing configured: PyPI, as pip
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://a.example/simple https://b.example/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "/srv/wheels")
    monkeypatch.setenv("PIP_PROXY", "proxy.example:3128")
    assert corpus.pip_sources() == corpus.Sources(
        indexes=("https://mirror.example/simple", "https://a.example/simple", "https://b.example/simple"),
        find_links=("/srv/wheels",), proxy="proxy.example:3128")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert corpus.pip_sources().indexes == ()


def test_the_configured_index_is_the_one_asked_and_its_bytes_are_checked(tmp_path):
    """A mirror that serves other bytes under the archive's name: refused by the sha256, naming the mirror's
    URL, nothing left behind (fetched from a URL of its own, the corpus would have ignored the mirror)."""
    wrong = tmp_path / "files" / corpus.ARCHIVE
    wrong.parent.mkdir()
    wrong.write_bytes(b"not numpy's archive")
    out = fetch_with_pip_config(tmp_path, PIP_INDEX_URL=simple_index(tmp_path / "mirror", wrong))
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (f"python -m hina.host.corpus fetch: {wrong.as_uri()}: sha256 "
                                                   f"{corpus._sha256(wrong)}, expected {corpus.SHA256}")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_an_index_without_the_archive_is_said_in_one_line(tmp_path):
    empty = tmp_path / "simple"
    empty.mkdir()
    out = fetch_with_pip_config(tmp_path, PIP_INDEX_URL=empty.as_uri())
    assert out.returncode == 1
    assert out.stderr.strip() == (f"python -m hina.host.corpus fetch: no {corpus.ARCHIVE} at pip's sources: "
                                  f"find-links none; indexes {empty.as_uri()}")


@pytest.mark.skipif(corpus.missing(CACHED) is not None, reason="this machine has not fetched the archive")
@pytest.mark.parametrize("how", ["wheelhouse", "mirror"])
def test_the_archive_comes_from_an_offline_wheelhouse_or_a_mirror(tmp_path, how):
    """No network needed: pip's find-links folder (an offline wheelhouse), or a file:// index, holds it; the
    index pip would ask otherwise is unreachable."""
    if how == "wheelhouse":
        (tmp_path / "wheels").mkdir()
        (tmp_path / "wheels" / corpus.ARCHIVE).symlink_to(CACHED)
        env = {"PIP_FIND_LINKS": str(tmp_path / "wheels"), "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}
    else:
        env = {"PIP_INDEX_URL": simple_index(tmp_path / "mirror", CACHED)}
    out = fetch_with_pip_config(tmp_path, **env)
    assert out.returncode == 0, out.stderr
    assert corpus.missing(tmp_path / "out" / corpus.ARCHIVE) is None
    where = tmp_path / "wheels" / corpus.ARCHIVE if how == "wheelhouse" else CACHED
    assert f"corpus: fetching {where.as_uri()} " in out.stdout, out.stdout
