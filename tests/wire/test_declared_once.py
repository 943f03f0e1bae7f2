"""The wire format is declared once (hina/wire/headers.py): the P4 program, the scapy layer, the Lua
dissector and the compiled kernels agree with that declaration, and nothing else declares it again; the
compiled helpers that read and write frames are defined once (hina/wire/compiled.py), and the kernel
groups' stamps name every module they compile in."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import make_vectors  # tests/, on the path by tests/conftest.py
import numpy as np
import pytest

from hina.wire import frames, headers, lua
from hina.wire.headers import FIELDS, UDP_PORT, Drop, Flags, MsgType, Op

ROOT = Path(__file__).resolve().parents[2]
P4 = ROOT / "p4"
PACKAGES = ["codec", "wire", "control", "switch_emulator", "host", "baselines", "sim", "mininet", "benchmarks",
            "hina", "tools"]


# the two P4 programs: BMv2's (p4/) and Tofino's (p4/tna/)
PROGRAMS = [P4, P4 / "tna"]


def p4_header(name: str, program: Path = P4) -> list[tuple[str, int]]:
    """The fields of `header NAME { bit<W> field; ... }` in a program's headers.p4, in order."""
    text = (program / "headers.p4").read_text()
    body = re.search(rf"header {name}\s*\{{(.*?)\}}", text, re.S)
    assert body, f"{program.relative_to(ROOT)}/headers.p4 declares no header {name}"
    return [(field, int(width)) for width, field in re.findall(r"bit<(\d+)>\s+(\w+)\s*;", body.group(1))]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_p4_hina_header_is_the_declaration_field_by_field(program):
    assert p4_header("hina_t", program) == list(FIELDS)
    assert sum(width for _, width in p4_header("hina_t", program)) == 8 * headers.HEADER_BYTES


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_p4_constants_are_the_declarations_codes(program):
    consts = p4_defines(program / "configuration.p4")
    assert consts["HINA_PORT"] == UDP_PORT
    assert {m.name: m.value for m in MsgType} == {k[4:]: v for k, v in consts.items() if k.startswith("MSG_")}
    assert {o.name: o.value for o in Op} == {k[3:]: v for k, v in consts.items() if k.startswith("OP_")}
    assert {f.name: f.value for f in Flags} == {k[5:]: v for k, v in consts.items() if k.startswith("FLAG_")}
    drops = {k[5:]: v for k, v in consts.items() if k.startswith("DROP_") and k not in ("DROP_NONE", "DROP_REASONS")}
    assert {d.name: d.value for d in Drop} == drops
    assert consts["DROP_REASONS"] == headers.DROP_REASONS and consts["DROP_NONE"] == 0
    assert consts["OTHER_SUBTREE"] == headers.OTHER_SUBTREE


def test_scapy_layer_has_the_declared_fields_widths_and_flag_names():
    from hina.wire.scapy_layer import Hina

    fields = [(f.name, f.size if hasattr(f, "size") else 8 * f.sz) for f in Hina.fields_desc[:-1]]
    assert [(name, int(bits)) for name, bits in fields] == list(FIELDS)
    flags = next(f for f in Hina.fields_desc if f.name == "flags")
    assert flags.names[:2] == ["RESEND", "STALE_RUN"]
    frame = Hina(msg_type=1, flags=int(Flags.STALE_RUN), count=2, words=[7, -1]) / bytes(8)
    again = Hina(bytes(frame))
    assert again.words == [7, -1] and again.flags == Flags.STALE_RUN and bytes(again.payload) == bytes(8)


def test_wireshark_dissector_is_the_generated_one():
    committed = (ROOT / "wireshark" / "hina.lua").read_text()
    assert committed == lua.render(), "wireshark/hina.lua is stale: python -m hina.wire.lua > wireshark/hina.lua"
    assert "STALE_RUN" in committed.upper() and f"add({UDP_PORT}, hina)" in committed


def test_every_flag_and_field_appears_in_the_dissector():
    text = lua.render()
    for name, _ in FIELDS:
        assert f'"hina.{name}"' in text, name
    for flag in Flags:
        assert f"hina.flags.{flag.name.lower()}" in text, flag


def test_a_flag_declared_without_its_dissector_title_is_named(monkeypatch, capsys):
    """A flag added to `Flags` needs its title in wire/lua.py: the generator says which, in one line."""
    monkeypatch.setattr(lua, "_FLAG_TITLES", {f: t for f, t in lua._FLAG_TITLES.items() if f != Flags.PENDING})
    with pytest.raises(ValueError, match=r"no title for flags \['PENDING'\], titles for no flag \[\]"):
        lua.render()
    assert lua.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m hina.wire.lua: ") and err.count("\n") == 1 and "PENDING" in err


def _assignments(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    names.add(leaf.id)
    return names


@pytest.mark.parametrize("name", ["UDP_PORT", "HEADER_BYTES", "MAX_WORKERS", "VERSION_BIT", "FRAME_OVERHEAD",
                                  "MAX_FRAME_BYTES", "MAX_SLOTS", "WORD_BYTES", "ETH_HEADER_BYTES", "IPV4_HEADER_BYTES",
                                  "UDP_HEADER_BYTES", "ETHERTYPE_IPV4", "IPPROTO_UDP", "IPV4_AT", "UDP_AT", "HINA_AT",
                                  "VNET_HDR_BYTES", "MAX_SEGMENTS", "SOCKADDR_IN_BYTES", "SOCKADDR_LL_BYTES",
                                  "PACKET_OUTGOING", "SOL_PACKET", "UDP_SEGMENT", "MAX_PARENTS"])
def test_a_wire_constant_is_assigned_in_one_module(name):
    """Others import it (a module may still bind it to an integer of its own for numba: not by this name)."""
    owners = [str(p.relative_to(ROOT)) for folder in PACKAGES for p in sorted((ROOT / folder).glob("*.py"))
              if name in _assignments(p)]
    assert len(owners) == 1, f"{name} is assigned in {owners}"


def test_the_headers_around_hina_are_p4s_field_by_field():
    assert p4_header("ethernet_t") == list(headers.ETHERNET)
    assert p4_header("ipv4_t") == list(headers.IPV4)
    assert p4_header("udp_t") == list(headers.UDP)
    consts = dict(re.findall(r"const\s+bit<\d+>\s+(\w+)\s*=\s*(\w+)\s*;", (P4 / "headers.p4").read_text()))
    assert int(consts["ETHERTYPE_IPV4"], 0) == headers.ETHERTYPE_IPV4
    assert int(consts["IPPROTO_UDP"], 0) == headers.IPPROTO_UDP
    assert (frames.IPV4_AT, frames.UDP_AT, frames.HINA_AT) == (14, 34, 42)  # and the offsets a capture shows
    assert (frames.ETH_TYPE_AT, frames.IP_PROTOCOL_AT, frames.IP_CHECKSUM_AT, frames.UDP_DPORT_AT) == (12, 23, 24, 36)


# The modules that read and write frames at byte offsets: each takes them from the declarations.  Not
# hina/wire/compiled.py, whose loads count the bytes within a field (`at + 1`, `at + 2`).
OFFSET_USERS = ["switch_emulator/controls.py", "switch_emulator/batch.py", "switch_emulator/frames.py",
                "switch_emulator/raw.py", "switch_emulator/pipes.py", "switch_emulator/pipeline.py",
                "switch_emulator/fuzz.py", "switch_emulator/udp.py", "switch_emulator/registers.py",
                "host/sendplane.py", "host/transport.py", "wire/frames.py", "wire/offload.py", "wire/sockio.py"]


def literal_offsets(tree: ast.AST) -> list[str]:
    """Integers past 1 added to or taken from a position (`at + 6`, `ETH + 10`, `SKF_LL_OFF + 12`: any
    `x + 2` with x not a constant), or standing for one in a subscript (`frame[14]`, `data[0:6]`)."""
    found = []

    def offset_like(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and type(node.value) is int and node.value > 1

    def variable(node: ast.AST) -> bool:
        return any(isinstance(n, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and \
                any(offset_like(a) and variable(b) for a, b in ((node.left, node.right), (node.right, node.left))):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Subscript):  # the index itself, or a slice's bounds
            index = node.slice
            parts = [index.lower, index.upper] if isinstance(index, ast.Slice) else \
                list(index.elts) if isinstance(index, ast.Tuple) else [index]
            found.extend(f"line {node.lineno}: [{ast.unparse(part)}]" for part in parts if offset_like(part))
    return found


@pytest.mark.parametrize("module", OFFSET_USERS)
def test_no_header_offset_is_written_as_a_number(module):
    """No `at + 6`, `frame[14]` or `"!12xHB8xB12xHH"`: every field of the hina, Ethernet, IPv4, UDP,
    virtio_net_hdr and socket address headers is read and written at an offset derived from its declaration
    (`AT_*`, `hina.wire.frames`'s `*_AT`, `hina.wire.offload.VNET_*_AT`, `hina.wire.sockio`'s)."""
    text = (ROOT / module).read_text()
    assert not literal_offsets(ast.parse(text)), literal_offsets(ast.parse(text))
    assert not re.search(r"['\"][!=<>@]?\d+x", text), "a struct format that skips bytes by number"


def test_the_offset_guard_catches_what_it_is_for():
    """The guard above, tried on the mistakes it exists for."""
    for line in ("x = data[at + 6]", "y = _be16(rx, base + 12)", "f[12:14] = b'00'", "z = frame[14]",
                 "w = get16(b, IP_END - 2)", "U16.pack_into(out, ETH + 10, 0)", "p = [(LD, SKF_LL_OFF + 12)]"):
        assert literal_offsets(ast.parse(line)), line
    for line in ("x = data[at + AT_POOL_INDEX]", "y = iov[2 * m + 1]", "z = b[at : at + HINA_AT]",
                 "SKF_LL_OFF = (1 << 32) - 0x200000"):
        assert not literal_offsets(ast.parse(line)), line


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}


def shape(fn: ast.FunctionDef) -> str:
    """A function's body with its docstring dropped and its names numbered in order of appearance: two
    copies of one helper have the same shape whatever they are called."""
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) \
        else fn.body
    names: dict[str, str] = {a.arg: f"v{i}" for i, a in enumerate(fn.args.args)}
    copy = ast.parse(ast.unparse(ast.Module(body=body, type_ignores=[])))
    for node in ast.walk(copy):
        if isinstance(node, ast.Name):
            node.id = names.setdefault(node.id, f"v{len(names)}")
    return ast.dump(copy, annotate_fields=False)


HELPERS = _functions(ROOT / "wire" / "compiled.py")
# the Python twin of the compiled IPv4 checksum, for Python callers (struct, three times faster there than the
# compiled one run as Python); `test_the_python_and_compiled_checksums_agree` holds them equal
TWINS = {("wire/frames.py", "ipv4_checksum")}


def test_the_compiled_frame_helpers_are_defined_once():
    """bswap, the byte-order loads and stores, the checksums: in hina/wire/compiled.py only, imported by the
    sender, the switch and offload; no second copy under its name (with or without a leading underscore, or as
    `_be16`/`_le16`) or under another (the same body)."""
    names = {n.lstrip("_") for n in HELPERS if n != "words"} | {"be16", "be32", "le16", "put_le16"}  # (a common word)
    shapes = {shape(fn): name for name, fn in HELPERS.items() if len(fn.body) > 1 or name != "words"}
    copies = []
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).glob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel == "wire/compiled.py":
                continue
            for name, fn in _functions(path).items():
                if (rel, name) in TWINS:
                    continue
                if name.lstrip("_") in names or shape(fn) in shapes:
                    copies.append(f"{rel}: {name}")
    assert not copies, f"a second copy of hina.wire.compiled's helpers: {copies}"
    for module in ("host/sendplane.py", "switch_emulator/controls.py", "switch_emulator/batch.py", "wire/offload.py"):
        assert "from hina.wire.compiled import" in (ROOT / module).read_text() or \
            "from .compiled import" in (ROOT / module).read_text(), module


def test_the_python_and_compiled_checksums_agree():
    from hina.wire import compiled

    rng = np.random.default_rng(7)
    for _ in range(200):
        header = rng.integers(0, 256, frames.HINA_AT, dtype=np.uint8)
        assert compiled.ipv4_checksum(header, frames.IPV4_AT) == frames.ipv4_checksum(header.tobytes(), frames.IPV4_AT)
    framed = frames.encapsulate(b"x" * 7, src_mac=bytes(6), dst_mac=bytes(6), src_ip=bytes(4), dst_ip=bytes(4),
                                sport=1, dport=2)  # a header with its checksum: sums to all ones
    assert compiled.ipv4_checksum(np.frombuffer(framed, np.uint8).copy(), frames.IPV4_AT) == \
        frames.U16.unpack_from(framed, frames.IP_CHECKSUM_AT)[0]


def _closure(modules: tuple[str, ...]) -> set[str]:
    """The hina modules `modules` import at their top, and those import, and so on."""
    seen: set[str] = set()
    todo = list(modules)
    folders = {"hina.codec": "codec", "hina.wire": "wire", "hina.control": "control",
               "hina.emulator": "switch_emulator", "hina.host": "host", "hina": "hina"}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        package, _, name = module.rpartition(".")
        path = ROOT / folders[package] / f"{name}.py"
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).rstrip(".")
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    target = sub if base in folders and (ROOT / folders[base] / f"{alias.name}.py").exists() else base
                    if target.startswith("hina.") and target not in folders:
                        todo.append(target)
            elif isinstance(node, ast.Import):
                todo += [a.name for a in node.names if a.name.startswith("hina.") and a.name not in folders]
    return seen


@pytest.mark.parametrize("group", ["sender", "switch", "offload"])
def test_a_kernel_groups_stamp_names_every_module_it_compiles_in(group):
    """A group's stamp (`hina.kernels`) names the modules whose constants or inlined helpers its kernels
    compile in: all that its kernel modules import, directly or not (the compile machinery aside), so that
    a changed offset or helper clears the group's cache instead of leaving old code in it."""
    from hina import kernels

    g = kernels.GROUPS[group]
    own = tuple(f"{g.package}.{m}" for m in g.modules)
    needed = _closure(own) - set(own) - {"hina.kernels", "hina.progress"}
    assert needed <= set(g.depends), f"{group}'s stamp misses {sorted(needed - set(g.depends))}"


# -- numbers the P4 programs and Python must agree on, beyond the header ----------------------------------------

def p4_defines(path: Path) -> dict[str, int]:
    """Every `#define NAME VALUE` and `const ... NAME = VALUE;` of a P4 file whose value is one integer."""
    text = path.read_text()
    found = {n: int(v, 0) for n, v in re.findall(r"const\s+[\w<>]+\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;", text)}
    found.update({n: int(v, 0) for n, v in re.findall(r"#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)\b", text)})
    return found


def p4_sum(path: Path, name: str) -> list[str]:
    """The terms of `const ... NAME = a + b + ...;` (how P4 spells a length out of its parts)."""
    m = re.search(rf"const\s+[\w<>]+\s+{name}\s*=\s*([^;]+);", path.read_text())
    assert m, f"{path.relative_to(ROOT)} declares no {name}"
    return [t.strip() for t in m.group(1).split("+")]


CONFIGURATIONS = [program / "configuration.p4" for program in PROGRAMS]


@pytest.mark.parametrize("path", CONFIGURATIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_p4_slot_space_and_k_are_the_control_planes(path):
    """The registers hold the slot space the ledger hands out (a job placed past HINA_SLOTS would index past
    them), and K is the one the controller refuses any other for."""
    from hina.control import controller, ledger

    consts = p4_defines(path)
    assert consts["HINA_SLOTS"] == ledger.DEFAULT_SPACE == controller.P4_SLOTS
    assert consts["HINA_WORDS"] == controller.P4_WORDS == make_vectors.K  # the packet vectors are for that K
    assert consts["HINA_COPIES"] == 2 * consts["HINA_SLOTS"]  # two copies per slot: the pool index's version bit
    assert ledger.DEFAULT_SPACE <= headers.MAX_SLOTS  # the header's slot field reaches every one of them


@pytest.mark.parametrize("path", CONFIGURATIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_p4_frame_lengths_are_the_declared_sizes(path):
    """udp.length = the UDP header, the hina header and K words: the parser drops any other length."""
    assert p4_sum(path, "HINA_UDP_LENGTH") == [str(headers.UDP_HEADER_BYTES), str(headers.HEADER_BYTES),
                                               f"{headers.WORD_BYTES} * HINA_WORDS"]
    assert p4_sum(path, "HINA_MIN_UDP_LENGTH") == [str(headers.UDP_HEADER_BYTES), str(headers.HEADER_BYTES)]


def test_the_p4_registers_are_sized_by_the_slot_space_and_the_worker_bitmap():
    consts = p4_defines(P4 / "configuration.p4")
    assert consts["HINA_VALUES"] == consts["HINA_COPIES"] * consts["HINA_WORDS"]
    # one bit per worker in an arrival bitmap: MAX_WORKERS is what fits
    assert re.search(rf"register<bit<{headers.MAX_WORKERS}>>\(HINA_COPIES\) bitmap;",
                     (P4 / "arrival_bitmap.p4").read_text())
    tna = (P4 / "tna" / "configuration.p4").read_text()
    slot_bits = int(re.search(r"typedef bit<(\d+)> slot_index_t;", tna).group(1))
    copy_bits = int(re.search(r"typedef bit<(\d+)> copy_index_t;", tna).group(1))
    assert 1 << slot_bits == consts["HINA_SLOTS"] and 1 << copy_bits == consts["HINA_COPIES"]


def int_literals(source: str, value: int) -> list[int]:
    """The lines where `value` is written as an integer in code (not in a string or a comment)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and type(node.value) is int and node.value == value]


@pytest.mark.parametrize("folder", PACKAGES)
def test_k_for_a_jumbo_frame_is_computed_never_written(folder):
    """K = max_words(9000) is what a 9000-byte MTU holds; a module that writes the number instead keeps it when
    the header or the MTU changes (hina.host.job.DEFAULT_WORDS is the default K)."""
    k = headers.max_words(9000)
    found = [f"{p.relative_to(ROOT)}:{line}" for p in sorted((ROOT / folder).glob("*.py"))
             for line in int_literals(p.read_text(), k)]
    assert not found, f"K = {k} written as a number at {found}: use DEFAULT_WORDS or max_words(9000)"


def test_the_literal_check_finds_a_written_k_and_not_one_in_words():
    source = '"""K = 2239 words."""\nWORDS = max_words(9000)  # 2239\nwords: int = 2239\nhelp = "default 2239"\n'
    assert int_literals(source, 2239) == [3]
