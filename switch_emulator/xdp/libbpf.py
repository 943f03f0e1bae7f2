"""libbpf from Python: the public API of libbpf.so.1 (Debian's libbpf1) through ctypes, and nothing else.

libbpf opens and loads the compiled program (`bpf_object__open_file`, `bpf_object__load`: it
creates the maps, relocates and loads the programs, and the kernel's verifier checks them); the
rest is its thin `bpf()` wrappers: map updates and lookups (`bpf_map_update_elem`, with `BPF_F_LOCK`
for a value that holds a spin lock), maps made at run time (`bpf_map_create`: each job's replica
group), `bpf_prog_test_run_opts` (a program run on one frame, without a network: the tests, and the
control plane's slot commands), `bpf_xdp_attach`, and the run-time statistics
(`bpf_enable_stats`, `bpf_obj_get_info_by_fd`).  Every failure raises `BpfError` naming the call.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import typing
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint32, c_uint64, c_void_p

BPF_F_LOCK = 4  # a map update or lookup that takes the value's spin lock
BPF_STATS_RUN_TIME = 0
XDP_FLAGS_DRV_MODE = 1 << 2  # native XDP: in the driver (veth has it); generic XDP runs after the skb is built
XDP_PASS, XDP_REDIRECT = 2, 4


class BpfError(OSError):
    """A libbpf call failed: the call, what it was for, and the kernel's error (one line: no errno number)."""

    def __str__(self) -> str:
        return str(self.strerror)


class TestRunOpts(ctypes.Structure):
    """struct bpf_test_run_opts (libbpf/bpf.h)."""

    _fields_ = [("sz", c_size_t), ("data_in", c_void_p), ("data_out", c_void_p), ("data_size_in", c_uint32),
                ("data_size_out", c_uint32), ("ctx_in", c_void_p), ("ctx_out", c_void_p),
                ("ctx_size_in", c_uint32), ("ctx_size_out", c_uint32), ("retval", c_uint32), ("repeat", c_int),
                ("duration", c_uint32), ("flags", c_uint32), ("cpu", c_uint32), ("batch_size", c_uint32)]


class XdpMd(ctypes.Structure):
    """struct xdp_md, a test run's context: where the frame starts after its metadata, the ingress interface."""

    _fields_ = [("data", c_uint32), ("data_end", c_uint32), ("data_meta", c_uint32), ("ingress_ifindex", c_uint32),
                ("rx_queue_index", c_uint32), ("egress_ifindex", c_uint32)]


class ProgInfo(ctypes.Structure):
    """struct bpf_prog_info (linux/bpf.h) up to the run-time statistics and the instructions the verifier walked:
    the kernel fills what fits."""

    _fields_ = [("type", c_uint32), ("id", c_uint32), ("tag", ctypes.c_uint8 * 8), ("jited_prog_len", c_uint32),
                ("xlated_prog_len", c_uint32), ("jited_prog_insns", c_uint64), ("xlated_prog_insns", c_uint64),
                ("load_time", c_uint64), ("created_by_uid", c_uint32), ("nr_map_ids", c_uint32),
                ("map_ids", c_uint64), ("name", ctypes.c_char * 16), ("ifindex", c_uint32),
                ("gpl_compatible", c_uint32), ("netns_dev", c_uint64), ("netns_ino", c_uint64),
                ("nr_jited_ksyms", c_uint32), ("nr_jited_func_lens", c_uint32), ("jited_ksyms", c_uint64),
                ("jited_func_lens", c_uint64), ("btf_id", c_uint32), ("func_info_rec_size", c_uint32),
                ("func_info", c_uint64), ("nr_func_info", c_uint32), ("nr_line_info", c_uint32),
                ("line_info", c_uint64), ("jited_line_info", c_uint64), ("nr_jited_line_info", c_uint32),
                ("line_info_rec_size", c_uint32), ("jited_line_info_rec_size", c_uint32), ("nr_prog_tags", c_uint32),
                ("prog_tags", c_uint64), ("run_time_ns", c_uint64), ("run_cnt", c_uint64),
                ("recursion_misses", c_uint64), ("verified_insns", c_uint32)]


_SIGNATURES = {
    "bpf_object__open_file": (c_void_p, [c_char_p, c_void_p]),
    "bpf_object__load": (c_int, [c_void_p]),
    "bpf_object__close": (None, [c_void_p]),
    "bpf_object__find_map_by_name": (c_void_p, [c_void_p, c_char_p]),
    "bpf_object__find_program_by_name": (c_void_p, [c_void_p, c_char_p]),
    "bpf_program__fd": (c_int, [c_void_p]),
    "bpf_map__fd": (c_int, [c_void_p]),
    "bpf_map__set_max_entries": (c_int, [c_void_p, c_uint32]),
    "bpf_map__inner_map": (c_void_p, [c_void_p]),
    "bpf_map__type": (c_int, [c_void_p]),
    "bpf_map__key_size": (c_uint32, [c_void_p]),
    "bpf_map__value_size": (c_uint32, [c_void_p]),
    "bpf_map__max_entries": (c_uint32, [c_void_p]),
    "bpf_map_create": (c_int, [c_int, c_char_p, c_uint32, c_uint32, c_uint32, c_void_p]),
    "bpf_map_update_elem": (c_int, [c_int, c_void_p, c_void_p, c_uint64]),
    "bpf_map_lookup_elem_flags": (c_int, [c_int, c_void_p, c_void_p, c_uint64]),
    "bpf_map_delete_elem": (c_int, [c_int, c_void_p]),
    "bpf_map_get_next_key": (c_int, [c_int, c_void_p, c_void_p]),
    "bpf_prog_test_run_opts": (c_int, [c_int, POINTER(TestRunOpts)]),
    "bpf_xdp_attach": (c_int, [c_int, c_int, c_uint32, c_void_p]),
    "bpf_xdp_detach": (c_int, [c_int, c_uint32, c_void_p]),
    "bpf_enable_stats": (c_int, [c_int]),
    "bpf_obj_get_info_by_fd": (c_int, [c_int, c_void_p, POINTER(c_uint32)]),
    "libbpf_num_possible_cpus": (c_int, []),
    "libbpf_set_print": (c_void_p, [c_void_p]),
}


@functools.cache
def lib() -> ctypes.CDLL:
    """libbpf.so.1, its functions typed (OSError where it is not installed)."""
    so = ctypes.CDLL("libbpf.so.1", use_errno=True)
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(so, name)
        fn.restype, fn.argtypes = restype, argtypes
    return so


def _check(result: int, what: str) -> int:
    """libbpf returns -errno on failure (its 1.0 convention)."""
    if result < 0:
        raise BpfError(-result, f"{what}: {os.strerror(-result)}")
    return result


def possible_cpus() -> int:
    """The CPUs a per-CPU map holds a value for (possible, not online ones)."""
    return _check(lib().libbpf_num_possible_cpus(), "libbpf_num_possible_cpus")


class Map:
    """One BPF map by its file descriptor: updates, lookups and deletes of raw key and value bytes."""

    def __init__(self, fd: int, name: str, key_size: int, value_size: int, max_entries: int, map_type: int):
        self.fd, self.name, self.key_size, self.value_size = fd, name, key_size, value_size
        self.max_entries, self.type = max_entries, map_type

    def update(self, key: bytes, value: bytes, flags: int = 0) -> None:
        _check(lib().bpf_map_update_elem(self.fd, key, value, flags), f"updating map {self.name}")

    def lookup(self, key: bytes, size: int | None = None, flags: int = 0) -> bytes | None:
        """The value at `key` (`size` bytes: a per-CPU map's is one value per CPU), or None."""
        out = ctypes.create_string_buffer(size or self.value_size)
        result = lib().bpf_map_lookup_elem_flags(self.fd, key, out, flags)
        if result == -errno.ENOENT:
            return None
        _check(result, f"reading map {self.name}")
        return out.raw

    def delete(self, key: bytes) -> bool:
        result = lib().bpf_map_delete_elem(self.fd, key)
        if result == -errno.ENOENT:
            return False
        _check(result, f"deleting from map {self.name}")
        return True

    def keys(self) -> list[bytes]:
        found, key = [], None
        nxt = ctypes.create_string_buffer(self.key_size)
        while lib().bpf_map_get_next_key(self.fd, key, nxt) == 0:
            found.append(nxt.raw)
            key = ctypes.create_string_buffer(nxt.raw, self.key_size)
        return found

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def create_map(template: Map, name: str) -> Map:
    """A new map shaped as `template` (the inner map an outer map was declared with)."""
    fd = _check(lib().bpf_map_create(template.type, name.encode()[:15], template.key_size, template.value_size,
                                     template.max_entries, None), f"creating map {name}")
    return Map(fd, name, template.key_size, template.value_size, template.max_entries, template.type)


class BpfObject:
    """A compiled BPF object file: opened, its maps sized (`set_max_entries`), then loaded into the kernel."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        ptr = lib().bpf_object__open_file(self.path.encode(), None)
        if not ptr:
            code = ctypes.get_errno() or errno.EINVAL
            raise BpfError(code, f"opening the BPF object {self.path}: {os.strerror(code)}")
        self._obj = ptr
        self.loaded = False

    def _map_ptr(self, name: str) -> int:
        ptr = lib().bpf_object__find_map_by_name(self._obj, name.encode())
        if not ptr:
            raise BpfError(errno.ENOENT, f"the BPF object {self.path} has no map {name}")
        return ptr

    def set_max_entries(self, name: str, entries: int) -> None:
        _check(lib().bpf_map__set_max_entries(self._map_ptr(name), entries), f"sizing map {name}")

    def load(self) -> None:
        _check(lib().bpf_object__load(self._obj), f"loading {self.path} (the verifier's log is above)")
        self.loaded = True

    def map(self, name: str) -> Map:
        return self._map(self._map_ptr(name), name)

    def inner_map(self, name: str) -> Map:
        """The template of an outer map's inner maps, before `load` (only its shape: no fd)."""
        ptr = lib().bpf_map__inner_map(self._map_ptr(name))
        if not ptr:
            raise BpfError(errno.ENOENT, f"map {name} of {self.path} has no inner map (or it is loaded already)")
        return self._map(ptr, f"{name}.inner", fd=-1)

    @staticmethod
    def _map(ptr: int, name: str, fd: int | None = None) -> Map:
        so = lib()
        return Map(so.bpf_map__fd(ptr) if fd is None else fd, name, so.bpf_map__key_size(ptr),
                   so.bpf_map__value_size(ptr), so.bpf_map__max_entries(ptr), so.bpf_map__type(ptr))

    def program_fd(self, name: str) -> int:
        ptr = lib().bpf_object__find_program_by_name(self._obj, name.encode())
        if not ptr:
            raise BpfError(errno.ENOENT, f"the BPF object {self.path} has no program {name}")
        return _check(lib().bpf_program__fd(ptr), f"the program {name} is not loaded")

    def close(self) -> None:
        if self._obj:
            lib().bpf_object__close(self._obj)
            self._obj = None


class TestRun(typing.NamedTuple):
    """What one BPF_PROG_TEST_RUN gave: the program's return value, the frame it left (metadata first) and the
    kernel's time for the run (ns, the program alone)."""

    retval: int
    frame: bytes
    duration: int


def prog_test_run(prog_fd: int, frame: bytes, *, meta: int = 0, ingress_ifindex: int = 0,
                  out_size: int = 16384) -> TestRun:
    """Run an XDP program once on `frame` (its first `meta` bytes are XDP metadata) arriving on
    `ingress_ifindex` (0: the loopback device)."""
    din = ctypes.create_string_buffer(frame, len(frame))
    dout = ctypes.create_string_buffer(out_size)
    ctx = XdpMd(data=meta, data_end=len(frame), ingress_ifindex=ingress_ifindex)
    opts = TestRunOpts(sz=ctypes.sizeof(TestRunOpts), data_in=ctypes.addressof(din), data_out=ctypes.addressof(dout),
                       data_size_in=len(frame), data_size_out=out_size, ctx_in=ctypes.addressof(ctx),
                       ctx_size_in=ctypes.sizeof(ctx), repeat=1)
    _check(lib().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts)), "BPF_PROG_TEST_RUN")
    return TestRun(opts.retval, dout.raw[: opts.data_size_out], opts.duration)


def xdp_attach(ifindex: int, prog_fd: int, flags: int = XDP_FLAGS_DRV_MODE) -> None:
    """Attach an XDP program; a refusal is the BpfError alone (libbpf's own line about it is kept quiet: the
    caller says what it means)."""
    so = lib()
    printer = so.libbpf_set_print(None)
    try:
        result = so.bpf_xdp_attach(ifindex, prog_fd, flags, None)
    finally:
        so.libbpf_set_print(printer)
    _check(result, f"attaching XDP to interface {ifindex}")


def xdp_detach(ifindex: int, flags: int = XDP_FLAGS_DRV_MODE) -> None:
    _check(lib().bpf_xdp_detach(ifindex, flags, None), f"detaching XDP from interface {ifindex}")


def enable_stats() -> int:
    """Have the kernel time every BPF program run (bpf_stats_enabled) while the returned fd is open."""
    return _check(lib().bpf_enable_stats(BPF_STATS_RUN_TIME), "bpf_enable_stats")


def prog_info(prog_fd: int) -> ProgInfo:
    info = ProgInfo()
    size = c_uint32(ctypes.sizeof(info))
    _check(lib().bpf_obj_get_info_by_fd(prog_fd, ctypes.byref(info), ctypes.byref(size)), "bpf_obj_get_info_by_fd")
    return info
