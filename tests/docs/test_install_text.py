"""What the README and the install notes tell a new user holds: its commands make what they use, and the
PyTorch it promises is the one a plain index would give, with the way to ask for the CPU build."""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def shell_blocks(text: str) -> list[list[str]]:
    """The README's ```sh blocks, each a list of its command lines (comments cut)."""
    return [[line.split("  #")[0].strip() for line in block.strip().splitlines() if line.strip()]
            for block in re.findall(r"```sh\n(.*?)```", text, re.S)]


@pytest.mark.slow
def test_the_readmes_roundtrip_block_makes_its_own_gradients_and_runs(tmp_path):
    """`hina roundtrip g0.npy ...` once stood alone: the reader had no g0.npy.  The block runs as written,
    in an empty folder."""
    block = next(b for b in shell_blocks((ROOT / "README.md").read_text()) if any("hina roundtrip" in x for x in b))
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    for line in block:
        out = subprocess.run(line.replace(".venv/bin/", ""), shell=True, cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, (line, out.stderr)
    assert "exact: yes" in out.stdout, out.stdout


@pytest.mark.parametrize("page", ["README.md", "constraints.txt", "docs/ddp.md"])
def test_the_torch_install_text_says_what_a_plain_index_gives_and_how_to_ask_for_the_cpu_build(page):
    """constraints.txt pins torch==2.13.0, which a plain index serves on Linux x86-64 as its CUDA build: every
    page that says what `make install` installs says so, and names the index of the CPU build."""
    text = " ".join((ROOT / page).read_text().split())
    assert CPU_INDEX in text, page
    assert "CUDA" in text, page
    assert "PyTorch's CPU wheel" not in text, page  # what make install gives depends on the index
