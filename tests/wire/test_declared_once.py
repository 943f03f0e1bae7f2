"""The wire format is declared once (hina/wire/headers.py): the P4 program, the scapy layer, the Lua
dissector and the compiled kernels agree with that declaration, and nothing else declares it again."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hina.wire import headers, lua
from hina.wire.headers import FIELDS, UDP_PORT, Drop, Flags, MsgType, Op

ROOT = Path(__file__).resolve().parents[2]
P4 = ROOT / "p4"
PACKAGES = ["codec", "wire", "control", "switch_emulator", "host", "baselines", "sim", "mininet", "benchmarks",
            "hina", "tools"]


def p4_header(name: str) -> list[tuple[str, int]]:
    """The fields of `header NAME { bit<W> field; ... }` in p4/headers.p4, in order."""
    text = (P4 / "headers.p4").read_text()
    body = re.search(rf"header {name}\s*\{{(.*?)\}}", text, re.S)
    assert body, f"p4/headers.p4 declares no header {name}"
    return [(field, int(width)) for width, field in re.findall(r"bit<(\d+)>\s+(\w+)\s*;", body.group(1))]


def p4_constants() -> dict[str, int]:
    """Every `const ... NAME = VALUE;` and `#define NAME VALUE` of p4/configuration.p4."""
    text = (P4 / "configuration.p4").read_text()
    consts = {name: int(value, 0) for name, value in re.findall(r"const\s+[\w<>]+\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)",
                                                                 text)}
    consts.update({name: int(value, 0) for name, value in re.findall(r"#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)\s*$",
                                                                      text, re.M)})
    return consts


def test_p4_hina_header_is_the_declaration_field_by_field():
    assert p4_header("hina_t") == list(FIELDS)
    assert sum(width for _, width in p4_header("hina_t")) == 8 * headers.HEADER_BYTES


def test_p4_constants_are_the_declarations_codes():
    consts = p4_constants()
    assert consts["HINA_PORT"] == UDP_PORT
    assert {m.name: m.value for m in MsgType} == {k[4:]: v for k, v in consts.items() if k.startswith("MSG_")}
    assert {o.name: o.value for o in Op} == {k[3:]: v for k, v in consts.items() if k.startswith("OP_")}
    assert {f.name: f.value for f in Flags} == {k[5:]: v for k, v in consts.items() if k.startswith("FLAG_")}
    drops = {k[5:]: v for k, v in consts.items() if k.startswith("DROP_") and k not in ("DROP_NONE", "DROP_REASONS")}
    assert {d.name: d.value for d in Drop} == drops
    assert consts["DROP_REASONS"] == headers.DROP_REASONS and consts["DROP_NONE"] == 0


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
                                  "MAX_FRAME_BYTES", "MAX_SLOTS", "WORD_BYTES", "ETH_HEADER_BYTES"])
def test_a_wire_constant_is_assigned_in_one_module(name):
    """Others import it (a module may still bind it to an integer of its own for numba: not by this name)."""
    owners = [str(p.relative_to(ROOT)) for folder in PACKAGES for p in sorted((ROOT / folder).glob("*.py"))
              if name in _assignments(p)]
    assert len(owners) == 1, f"{name} is assigned in {owners}"


@pytest.mark.parametrize("module", ["switch_emulator/dataplane.py", "host/sendplane.py"])
def test_the_kernels_read_the_header_by_its_declared_offsets(module):
    """No `at + 6`: every hina header field the compiled paths read or write is at an `AT_*` offset."""
    text = (ROOT / module).read_text()
    literal = re.findall(r"(?:data|frame|tx|out)\[(?:at|o) \+ \d+\]|\((?:data|frame|tx), at \+ \d+\)", text)
    assert not literal, literal
    assert "AT_POOL_INDEX" in text and "AT_PHASE" in text


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


CONFIGURATIONS = [P4 / "configuration.p4", P4 / "tna" / "configuration.p4"]


@pytest.mark.parametrize("path", CONFIGURATIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_p4_slot_space_and_k_are_the_control_planes(path):
    """The registers hold the slot space the ledger hands out (a job placed past HINA_SLOTS would index past
    them), and K is the one the controller refuses any other for."""
    from hina.control import controller, ledger

    consts = p4_defines(path)
    assert consts["HINA_SLOTS"] == ledger.DEFAULT_SPACE == controller.P4_SLOTS
    assert consts["HINA_WORDS"] == controller.P4_WORDS
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


@pytest.mark.parametrize("folder", [
    pytest.param(f, marks=pytest.mark.xfail(strict=True, reason="sim/netsim.py's contest job writes K as a literal: "
                                            "take hina.host.job.DEFAULT_WORDS there and drop this mark"))
    if f == "sim" else f for f in PACKAGES])
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
