"""Compile the XDP switch (`hina_xdp.c`) once per machine, and say why it cannot run where it cannot.

`compiled()` is the object file for the current sources: the program, the header `hina_xdp.h`
(written from `hina.emulator.xdp.layout`, which takes the wire format from `hina.wire.headers`)
and the compiler's version name it, so a changed constant compiles a new one.  It is built by clang
(`-target bpf`) under a file lock beside the numba kernels' cache (`hina.kernels.cache_dir`): the
first process compiles it, any other waits, then loads it.  `make install` runs
`python -m hina.emulator.xdp.build`, which builds it where clang and libbpf's headers exist and
otherwise says why not and succeeds.

`missing()` says why the program cannot be built here (clang, libbpf's headers, libbpf.so.1),
`cannot_load()` why it cannot be loaded by this process (CAP_BPF and CAP_NET_ADMIN); the tests skip
with these reasons.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hina import kernels

from . import layout

SOURCE = Path(__file__).with_name("hina_xdp.c")
HEADER = "hina_xdp.h"
INCLUDE_DIRS = ("/usr/include", "/usr/local/include")
CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF = 12, 21, 39


def _bpf_headers() -> Path | None:
    """The folder holding libbpf's bpf/bpf_helpers.h (Debian's libbpf-dev)."""
    return next((Path(d) for d in INCLUDE_DIRS if (Path(d) / "bpf" / "bpf_helpers.h").exists()), None)


def _multiarch() -> Path | None:
    """Where Debian keeps asm/types.h, which linux/bpf.h includes (clang -target bpf does not search it)."""
    folder = Path("/usr/include") / f"{platform.machine()}-linux-gnu"
    return folder if (folder / "asm" / "types.h").exists() else None


@functools.cache
def missing() -> str | None:
    """Why the XDP switch cannot be built on this machine, or None."""
    if sys.platform != "linux":
        return "XDP is Linux's"
    if shutil.which("clang") is None:
        return "clang is not installed (apt-get install clang llvm libbpf-dev)"
    if _bpf_headers() is None:
        return "libbpf's headers (bpf/bpf_helpers.h) are not installed (apt-get install libbpf-dev)"
    try:
        from . import libbpf

        libbpf.lib()
    except OSError as exc:
        return f"libbpf.so.1 cannot be loaded ({exc}; apt-get install libbpf1)"
    return None


def _capabilities() -> int:
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("CapEff:"))
    return int(line.split()[1], 16)


def cannot_load() -> str | None:
    """Why this process cannot build or load the XDP switch (tools, or privileges), or None."""
    why = missing()
    if why is not None:
        return why
    caps = _capabilities()
    if not caps >> CAP_NET_ADMIN & 1 or not (caps >> CAP_BPF & 1 or caps >> CAP_SYS_ADMIN & 1):
        return "loading an XDP program needs CAP_BPF and CAP_NET_ADMIN (run as root)"
    return None


def _clang_version() -> str:
    return subprocess.run(["clang", "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]


def key() -> str:
    """What the object is compiled from: the program, the generated header, the compiler."""
    facts = SOURCE.read_bytes() + layout.c_header().encode() + _clang_version().encode()
    return hashlib.sha256(facts).hexdigest()[:16]


def target() -> Path:
    """Where the object for the current sources lives (it may not exist yet)."""
    return kernels.cache_dir(SOURCE) / f"hina_xdp.{key()}.o"


def command(folder: Path, out: Path) -> list[str]:
    """clang's command line: BPF, optimized (the verifier needs the loops clang leaves), with BTF (-g)."""
    includes = [f"-I{folder}"] + ([f"-I{_multiarch()}"] if _multiarch() else [])
    return ["clang", "-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-mcpu=v3", *includes, "-c", str(SOURCE),
            "-o", str(out)]


def compiled(stream=None) -> Path:
    """The object file for the current sources, compiled now (once per machine, under a lock) if missing.

    Raises RuntimeError naming what is missing, or with clang's errors."""
    why = missing()
    if why is not None:
        raise RuntimeError(f"the XDP switch cannot be built here: {why}")
    out = target()
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / "hina_xdp.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():  # built by the process this one waited for
            return out
        print("hina: compiling the XDP switch (once on this machine)", file=stream or sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            folder = Path(tmp)
            (folder / HEADER).write_text(layout.c_header())
            made = folder / "hina_xdp.o"
            proc = subprocess.run(command(folder, made), capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"clang could not compile {SOURCE.name}:\n{proc.stderr.strip()}")
            os.replace(made, out)
            for old in out.parent.glob("hina_xdp.*.o"):
                if old != out:
                    old.unlink(missing_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Build the XDP switch where this machine can (`make install`); where it cannot, say why and succeed."""
    why = missing()
    if why is not None:
        print(f"hina: the XDP switch (--xdp) was not built: {why}")
        return 0
    try:
        path = compiled(stream=sys.stdout)
    except RuntimeError as exc:
        print(f"hina: {exc}", file=sys.stderr)
        return 1
    print(f"hina: the XDP switch is built: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
