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
