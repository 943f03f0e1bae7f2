"""hina's compiled kernels: compiled once per machine, by one process, before anything waits on them.

The hot loops are numba kernels in six groups (`GROUPS`): the codec's bitmap, value and sketch
kernels (`hina.codec`), the sender's (`hina.host.sendplane`, `hina.host.congestion_rules`), the switch's
(`hina.emulator.controls` and `batch`) and segmentation offload's (`hina.wire.offload`).  numba
compiles a kernel in the first process that needs it and keeps it in its disk cache; every later
process loads it in milliseconds.  Left to itself, every process that
starts before the cache holds a kernel compiles it too: the first `hina demo` on a 2-core machine
compiled the same kernels in five processes at once.  Here a group is compiled under a lock:

- `ensure(group, load, build)`: a process that needs a group's kernels.  If this machine has compiled
  them (a stamp beside numba's cache names the sources, numba, Python and the CPU they were compiled
  for), `load()` takes them from the cache.  Otherwise the process takes the group's lock (a file
  lock beside the cache; a second process waits on it, and says for whom), compiles them with
  `build()` while a progress line says so, and writes the stamp.  A stamp for other sources means
  that the kernels' cache may hold code compiled with old constants (numba's cache checks the
  kernel's own file, not the modules it imports constants from): it is cleared first.
- `compile_all()`: every group not yet compiled, each in its own process, in parallel
  (`hina compile`, `make install`, and `hina demo` before it starts anything).

`python -m hina.kernels GROUP` compiles one group (what `compile_all` runs).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .progress import Progress, clock_text


@dataclasses.dataclass(frozen=True)
class Group:
    """A set of kernels compiled together: where they live, what they compile in, who compiles them."""

    package: str  # the package holding the kernel modules
    modules: tuple[str, ...]  # its modules that define kernels (their numba cache files are the group's)
    depends: tuple[str, ...]  # modules ("package.module") whose constants or inlined kernels they compile in
    builder: str  # "module:function" that compiles (and loads) the whole group in a process ("module:": import)
    what: str  # for the progress line


_WIRE_CODES = ("hina.codec.ops", "hina.codec.params", "hina.codec.rounds")  # what wire/headers.py takes from the codec
GROUPS = {
    # the codec's kernels compile as their modules are imported (explicit signatures): each module claims
    # its group at its top and finishes it at its end; values and sketch inline bitmap's helpers
    "codec-bitmap": Group("hina.codec", ("bitmap",), (), "hina.codec.bitmap:", "the codec's bitmap"),
    "codec-values": Group("hina.codec", ("values",), ("hina.codec.bitmap",), "hina.codec.values:",
                          "the codec's value"),
    "codec-sketch": Group("hina.codec", ("sketch",),
                          ("hina.codec.bitmap", "hina.codec.murmur", "hina.codec.ops", "hina.codec.params"),
                          "hina.codec.sketch:", "the codec's sketch"),
    # compiled on first call: the module's warm-up drives every kernel.  Each names the modules whose constants
    # or inlined helpers its kernels compile in, down to the codec's codes the header takes (a test holds this)
    "sender": Group("hina.host", ("sendplane", "congestion_rules"),
                    ("hina.wire.headers", "hina.wire.frames", "hina.wire.compiled", "hina.wire.offload",
                     *_WIRE_CODES),
                    "hina.host.window:warm", "the sender's"),
    "switch": Group("hina.emulator", ("controls", "batch"),
                    ("hina.emulator.registers", "hina.wire.headers", "hina.wire.frames", "hina.wire.compiled",
                     "hina.wire.sockio", "hina.wire.offload", "hina.control.config", *_WIRE_CODES),
                    "hina.emulator.batch:compile_kernels", "the switch's"),
    "offload": Group("hina.wire", ("offload",), ("hina.wire.headers", "hina.wire.frames", "hina.wire.compiled",
                                                 *_WIRE_CODES), "hina.wire.offload:compile_kernels",
                     "segmentation offload's"),
}
# compile_all starts the longest first
_ORDER = ("sender", "switch", "codec-sketch", "codec-bitmap", "codec-values", "offload")

_ready: set[str] = set()  # groups this process has ensured


def _folder(package: str) -> Path:
    """A package's folder, found without importing the package itself (its parents only)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"no package {package}")
    return Path(next(iter(spec.submodule_search_locations)))


def _module_file(dotted: str) -> Path:
    package, _, module = dotted.rpartition(".")
    return _folder(package) / f"{module}.py"


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def cache_dir(source: Path) -> Path:
    """Where numba caches the kernels of `source`, in the order numba itself looks: $NUMBA_CACHE_DIR,
    else the `__pycache__` beside the module where writable, else the user's cache."""
    def subpath() -> str:  # numba's name for a source folder inside a cache directory
        folder = os.path.dirname(os.path.abspath(source))
        return f"{os.path.basename(folder)}_{hashlib.sha1(folder.encode()).hexdigest()}"

    configured = os.environ.get("NUMBA_CACHE_DIR")
    if configured:
        return Path(configured) / subpath()
    in_tree = source.parent / "__pycache__"
    if _writable(in_tree):
        return in_tree
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "numba" / subpath()


def _cpu() -> str:
    """The CPU the kernels are compiled for: numba compiles for the host's model and features."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        model = next((line for line in info.splitlines() if line.startswith(("model name", "flags", "Features"))),
                     "")
        flags = next((line for line in info.splitlines() if line.startswith(("flags", "Features"))), "")
        return f"{platform.machine()} {model} {hashlib.sha256(flags.encode()).hexdigest()[:16]}"
    except OSError:
        return f"{platform.machine()} {platform.processor()}"


def fingerprint(group: str) -> dict[str, str]:
    """What a group's compiled kernels depend on: its sources, numba's version, Python's, the CPU."""
    g = GROUPS[group]
    files = [_folder(g.package) / f"{m}.py" for m in g.modules] + [_module_file(d) for d in g.depends]
    found = {"numba": importlib.metadata.version("numba"), "python": sys.version.split()[0], "cpu": _cpu()}
    for path in files:
        found[path.name if path.stem in g.modules else f"{path.parent.name}/{path.name}"] = \
            hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _key(facts: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def _where(group: str) -> Path:
    g = GROUPS[group]
    return cache_dir(_folder(g.package) / f"{g.modules[0]}.py")


def stamp(group: str) -> Path:
    """The file that says this machine has compiled `group` from its current sources."""
    return _where(group) / f"hina-{group}.{_key(fingerprint(group))}.ready"


def compiled(group: str) -> bool:
    return stamp(group).exists()


class Hold:
    """A process's claim on a group's kernels (`hold`): `compiling` says whether this process compiles
    them (holding the group's lock, the stale cache cleared, a progress line shown) or loads them from
    the cache; `finish(ok)` writes the stamp where it compiled them (`ok`), and lets the lock go."""

    def __init__(self, group: str, stream: IO[str] | None, quiet: bool) -> None:
        self.group, self.compiling = group, False
        self.stamp = stamp(group)
        self._file: IO[str] | None = None
        self._bar: Progress | None = None
        self._began = time.monotonic()
        if self.stamp.exists():
            return
        say = (lambda _m: None) if quiet else (lambda m: print(m, file=stream or sys.stderr, flush=True))
        where = self.stamp.parent
        where.mkdir(parents=True, exist_ok=True)
        self._file = f = open(where / f"hina-{group}.lock", "a+")  # held until finish()
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            say(f"hina: waiting for {holder}, which is compiling {GROUPS[group].what} kernels")
            fcntl.flock(f, fcntl.LOCK_EX)
        if self.stamp.exists():  # compiled by the process this one waited for
            self._release()
            return
        f.seek(0)
        f.truncate()
        f.write(f"process {os.getpid()}")
        f.flush()
        self.compiling = True
        _clear(group, where)
        self._began = time.monotonic()
        if not quiet:
            what = f"compiling {GROUPS[group].what} kernels (once on this machine; later processes load them)"
            self._bar = Progress(total=1, what=what, stream=stream if stream is not None else sys.stderr)
            self._bar.__enter__()
            self._bar.start(group)

    def _release(self) -> None:
        if self._file is not None:
            if self.compiling:
                self._file.seek(0)
                self._file.truncate()
                self._file.flush()
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def finish(self, ok: bool = True) -> None:
        if self._bar is not None:
            if ok:
                self._bar.done()
            self._bar.close()
            self._bar = None
        if self.compiling and ok and self._file is not None:
            facts = fingerprint(self.group) | {"seconds": f"{time.monotonic() - self._began:.1f}",
                                               "pid": str(os.getpid())}
            tmp = self.stamp.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(facts, indent=1) + "\n")
            tmp.replace(self.stamp)
        self._release()


def _clear(group: str, where: Path) -> None:
    """Remove the group's numba cache files and stamps (compiled from other sources, or never stamped)."""
    for module in GROUPS[group].modules:
        for pattern in (f"{module}.*.nbi", f"{module}.*.nbc"):
            for path in where.glob(pattern):
                path.unlink(missing_ok=True)
    for path in where.glob(f"hina-{group}.*.ready"):
        path.unlink(missing_ok=True)


def _quiet(quiet: bool | None) -> bool:
    return os.environ.get("HINA_KERNELS_QUIET") == "1" if quiet is None else quiet


def hold(group: str, *, stream: IO[str] | None = None, quiet: bool | None = None) -> Hold:
    """Claim `group`'s kernels before compiling or loading them: for a module whose kernels compile
    as it is imported (the codec's), `hold` at its top and `finish` at its end.  quiet: no progress
    line (default: as $HINA_KERNELS_QUIET says, which `compile_all` sets in its workers)."""
    return Hold(group, stream, _quiet(quiet))


def ensure(group: str, load: Callable[[], None], build: Callable[[], None] | None = None, *,
           stream: IO[str] | None = None, quiet: bool | None = None) -> None:
    """Have `group`'s kernels in this process: loaded from this machine's cache where it holds them,
    else compiled under the group's lock (one process compiles, the others wait, then load).

    load: takes the kernels this process needs (from the cache, or compiling what is missing);
    build: compiles every kernel of the group (default `load`).
    """
    if group in _ready:
        load()
        return
    h = hold(group, stream=stream, quiet=quiet)
    ok = False
    try:
        if h.compiling:
            (build or load)()
        else:
            load()
        ok = True
    finally:
        h.finish(ok)
    _ready.add(group)


def _run_builder(group: str) -> None:
    module, _, function = GROUPS[group].builder.partition(":")
    loaded = importlib.import_module(module)  # a codec module compiles its kernels as it is imported
    if function:
        getattr(loaded, function)()


def compile_all(groups: tuple[str, ...] | None = None, *, stream: IO[str] | None = None,
                jobs: int | None = None) -> dict[str, float]:
    """Compile every group this machine has not compiled yet, each in its own process, `jobs` at a time
    (default: the CPU count).  Returns the seconds each took (nothing for one already compiled).
    Raises RuntimeError naming a group whose process failed, with the end of what it printed."""
    todo = [g for g in (groups or _ORDER) if not compiled(g)]
    if not todo:
        return {}
    jobs = max(1, jobs or os.cpu_count() or 1)
    took: dict[str, float] = {}
    waiting = list(todo)
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    what = "compiling hina's kernels (once on this machine; later processes load them)"
    with Progress(total=len(todo), what=what, stream=stream if stream is not None else sys.stderr) as bar:
        bar.start(", ".join(todo))
        while waiting or running:
            while waiting and len(running) < jobs:
                g = waiting.pop(0)
                running[g] = (subprocess.Popen([sys.executable, "-m", "hina.kernels", "--quiet", g],
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
                              time.monotonic())
            time.sleep(0.05)
            for g, (proc, began) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[g]
                output = proc.stdout.read() if proc.stdout else ""
                if proc.returncode != 0:
                    for other, _ in running.values():
                        other.kill()
                    tail = "\n".join(output.strip().splitlines()[-15:])
                    raise RuntimeError(f"compiling {GROUPS[g].what} kernels failed (exit {proc.returncode}):\n{tail}")
                took[g] = time.monotonic() - began
                bar.done(f"{g}: compiled in {clock_text(took[g])}", label=", ".join(list(running) + waiting))
    return took


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    quiet = "--quiet" in args
    names = [a for a in args if a != "--quiet"]
    unknown = [n for n in names if n not in GROUPS]
    if not names or unknown:
        print(f"usage: python -m hina.kernels [--quiet] GROUP ...  (GROUP: {', '.join(GROUPS)}); "
              f"got {' '.join(unknown) or 'none'}", file=sys.stderr)
        return 2
    if quiet:
        os.environ["HINA_KERNELS_QUIET"] = "1"
    for name in names:
        _run_builder(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
