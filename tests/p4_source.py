"""p4/tna/'s P4 source, read and run: what tests/tna_model.py executes instead of a transliteration.

`program(folder, words)` reads a folder of P4_16 files as the compiler sees them (`#include "..."`,
`#define` with and without arguments and `##`, `#if`/`#ifdef`/`#ifndef`/`#elif`/`#else`; comments
dropped) and keeps their declarations: typedefs, constants, the fields of every struct and header, per
control its parameters, actions, tables (keys, constant entries, default action), registers,
RegisterActions, counters, checksum units, instances of other controls, local variables and apply block,
and per parser its states (statements and transition).  A `Pipe` runs those parsers and controls on
`Struct`s and `Header`s, with one pipe's registers and counters and the control plane's entries for the
tables that have no constant entries; a parser reads a `PacketIn` (the bytes the hardware hands it) and a
deparser writes a `PacketOut`.  A parser or control is compiled the first time it runs: names resolved and
types known (P4 is statically typed), its statements become Python closures on plain integers.

It knows the subset of P4_16 that p4/tna/ is written in, and raises `P4Unsupported`, naming what it met,
on anything else, so that a change to the source that needs more fails loudly:

- statements: `x = e;`, calls, `if (e) ... else ...`, `{ ... }`;
- expressions: `| & ^ ~ + - * / == != && || !`, `++`, slices `x[hi:lo]`, casts `(bit<W>) e`, `max(a, b)`,
  lists `{a, b, ...}` (their fields' bits, in order), `h.isValid()`, `h.setValid()`, `h.setInvalid()`,
  `t.apply()` of a table (and its `.hit`, `.miss`), `a.execute(i)` of a RegisterAction, `c.count(i)` of
  a Counter, `c.apply(...)` of a control instance (scalars copied in and out);
- parsers: `state s { ... transition s2; }` and `transition select(e, ...) { keyset: s; ... }` (constants,
  tuples, `_`, `default`, `v &&& m`, `a .. b`), `packet.extract(h)`, `packet.advance(bits)`; an extract
  past the end of the bytes stops the parser with error PacketTooShort, a select no keyset matches with
  NoMatch (`PacketIn.error`), the headers extracted before it valid;
- deparsers: `packet.emit(h)` (a valid header's bytes);
- TNA's `Checksum`: `add(h)`, `verify()` (true where the ones' complement sum of what was added is not
  0xFFFF: a checksum error, as bf-p4c compiles it), `update({...})` (the ones' complement of the sum);
- every value is masked to its type's width where it is stored, and an int<W> is signed where `max`
  compares it.
"""

from __future__ import annotations

import bisect
import collections
import copy
import dataclasses
import functools
import ipaddress
import operator
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

TNA = Path(__file__).resolve().parents[1] / "p4" / "tna"

# What of Intel's tna.p4 (not in this repository) p4/tna/ uses.  The intrinsic metadata the parsers extract
# are headers: the ingress one in tna.p4's layout, the egress one only its first fields and the replica id
# (the model makes the bytes the egress parser reads by this same declaration, so the fields it leaves out
# change nothing); the rest are structs of the fields the program reads or writes.
TNA_INTRINSICS = """
header ingress_intrinsic_metadata_t {
    bit<1> resubmit_flag; bit<1> _pad1; bit<2> packet_version; bit<3> _pad2; bit<9> ingress_port;
    bit<48> ingress_mac_tstamp;
}
struct ingress_intrinsic_metadata_from_parser_t { bit<16> parser_err; }
struct ingress_intrinsic_metadata_for_deparser_t { bit<3> drop_ctl; }
struct ingress_intrinsic_metadata_for_tm_t { bit<9> ucast_egress_port; bit<1> bypass_egress; bit<16> mcast_grp_a; }
header egress_intrinsic_metadata_t { bit<7> _pad0; bit<9> egress_port; bit<16> egress_rid; }
struct egress_intrinsic_metadata_from_parser_t { }
struct egress_intrinsic_metadata_for_deparser_t { bit<3> drop_ctl; }
struct egress_intrinsic_metadata_for_output_port_t { }
const bit<32> PORT_METADATA_SIZE = 64;
const bit<16> PARSER_ERROR_NO_MATCH = 0x0001;
const bit<16> PARSER_ERROR_PARTIAL_HDR = 0x0002;
"""

# packet_in and packet_out: what a parser reads and a deparser writes (`PacketIn`, `PacketOut`)
PACKET_TYPES = ("packet_in", "packet_out")


class P4Unsupported(Exception):
    """The source uses P4 that this reader does not know."""


class Type(NamedTuple):
    """A scalar type: bit<W>, int<W> (signed), bool (bit<1>).  A struct or header is named by a str."""

    width: int
    signed: bool = False

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    def signed_value(self, value: int) -> int:
        return value - (1 << self.width) if self.signed and value >> (self.width - 1) & 1 else value


BOOL = Type(1)


# -- values: structs and headers -------------------------------------------------------------------

class Struct:
    """A struct's fields by name (also as attributes), each masked to its type where it is stored (a field
    that is a struct or header, mask None, is kept as it is)."""

    __slots__ = ("_masks", "_values")

    def __init__(self, masks: dict[str, int | None], **values):
        object.__setattr__(self, "_masks", masks)
        object.__setattr__(self, "_values", {n: 0 if m is not None else None for n, m in masks.items()})
        for name, value in values.items():
            self[name] = value

    def __getitem__(self, name: str):
        return self._values[name]

    def __setitem__(self, name: str, value) -> None:
        mask = self._masks[name]  # KeyError: no such field
        self._values[name] = value & mask if mask is not None else value

    def __getattr__(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value) -> None:
        self[name] = value


class Header:
    """A header: its bytes, its fields over them big-endian in declaration order (also as attributes), and
    whether it is valid; an invalid one reads 0 and keeps nothing written to it."""

    __slots__ = ("_data", "_layout", "valid")

    def __init__(self, layout: dict[str, tuple[int, int, int, int]], size: int, valid: bool = False):
        object.__setattr__(self, "_data", bytearray(size))
        object.__setattr__(self, "_layout", layout)  # name -> first byte, end byte, shift, mask
        object.__setattr__(self, "valid", valid)

    def __len__(self) -> int:
        return len(self._data)

    def load(self, data: bytes) -> None:
        """Extracted: `data` (the header's size) as its bytes, and valid."""
        assert len(data) == len(self._data)
        self._data[:] = data
        self.set_valid(True)

    def set_valid(self, valid: bool) -> None:
        object.__setattr__(self, "valid", valid)

    def __bytes__(self) -> bytes:
        return bytes(self._data)

    def __getitem__(self, name: str) -> int:
        if not self.valid:
            return 0
        lo, hi, shift, mask = self._layout[name]
        return int.from_bytes(self._data[lo:hi], "big") >> shift & mask

    def __setitem__(self, name: str, value: int) -> None:
        if not self.valid:
            return
        lo, hi, shift, mask = self._layout[name]
        word = int.from_bytes(self._data[lo:hi], "big") & ~(mask << shift) | (value & mask) << shift
        self._data[lo:hi] = word.to_bytes(hi - lo, "big")

    def __getattr__(self, name: str) -> int:
        if name not in self._layout:
            raise AttributeError(name)
        return self[name]

    def __setattr__(self, name: str, value: int) -> None:
        self[name] = value


# -- packets and checksums -------------------------------------------------------------------------

class ParserStop(Exception):
    """A parser stopped by an error (P4's `error`: PacketTooShort, NoMatch)."""


class PacketIn:
    """What a parser reads: `data` from the start, the headers extracted off it one after another.  Once the
    parser has run, `error` is the error that stopped it (None: it reached accept) and `rest()` the bytes it
    did not extract (a deparser's output goes on with them)."""

    def __init__(self, data: bytes):
        self.data, self.at, self.error = bytes(data), 0, None

    def extract(self, header: Header) -> None:
        end = self.at + len(header)
        if end > len(self.data):
            self.error = "PacketTooShort"
            raise ParserStop(self.error)
        header.load(self.data[self.at:end])
        self.at = end

    def advance(self, bits: int) -> None:
        if bits % 8:
            raise P4Unsupported(f"advance by {bits} bits, not whole bytes")
        if self.at + bits // 8 > len(self.data):
            self.error = "PacketTooShort"
            raise ParserStop(self.error)
        self.at += bits // 8

    def rest(self) -> bytes:
        return self.data[self.at:]


class PacketOut:
    """What a deparser writes: the valid headers it emits, in its order."""

    def __init__(self):
        self.data = bytearray()

    def emit(self, header: Header) -> None:
        if header.valid:
            self.data += bytes(header)


class Checksum:
    """TNA's Checksum unit: the 16-bit ones' complement sum of what `add` was given (bytes)."""

    def __init__(self):
        self.sum = 0

    @staticmethod
    def of(data: bytes) -> int:
        """The ones' complement sum of `data`'s 16-bit words (an odd byte padded with a zero)."""
        if len(data) % 2:
            data += b"\0"
        total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        return total

    def add(self, data: bytes) -> None:
        self.sum = self.of(self.of(data).to_bytes(2, "big") + self.sum.to_bytes(2, "big"))

    def verify(self) -> int:
        return int(self.sum != 0xFFFF)

    @classmethod
    def update(cls, data: bytes) -> int:
        return ~cls.of(data) & 0xFFFF


# -- the preprocessor ------------------------------------------------------------------------------

_IDENT = re.compile(r"\b[A-Za-z_]\w*")


class _Preprocessor:
    """One file as the compiler reads it: its own lines, conditionals resolved and macros expanded; the
    files it includes (`#include "..."`) only define macros (each file's declarations are read from it).
    Line n of the text is line n of the file (comments, directives and the lines a `\\` continues are
    left blank), so that what runs can be told by the file's own line numbers."""

    def __init__(self, folder: Path, defines: dict[str, str]):
        self.folder = folder
        self.macros: dict[str, tuple[list[str] | None, str]] = {n: (None, v) for n, v in defines.items()}

    def text(self, file: str) -> str:
        source = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n") or " ",
                        (self.folder / file).read_text(), flags=re.S)
        out, stack, live = [], [], True  # stack: (live outside the #if, a branch taken)
        for line, continued in _joined(re.sub(r"//.*", "", source).split("\n")):
            directive = re.match(r"\s*#\s*(\w+)\s*(.*?)\s*$", line)
            out += [self.expand(line) if live and directive is None else ""] + [""] * continued
            if directive is None:
                continue
            word, rest = directive.groups()
            if word in ("if", "ifdef", "ifndef"):
                taken = live and self._holds(word, rest)
                stack.append((live, taken))
                live = taken
            elif word in ("elif", "else"):
                outer, done = stack[-1]
                live = outer and not done and (word == "else" or self._holds("if", rest))
                stack[-1] = (outer, done or live)
            elif word == "endif":
                live = stack.pop()[0]
            elif not live:
                continue
            elif word == "define":
                name, params, body = re.match(r"(\w+)(?:\(([^)]*)\))?\s*(.*)", rest).groups()
                self.macros[name] = ([p.strip() for p in params.split(",")] if params is not None else None, body)
            elif word == "undef":
                self.macros.pop(rest, None)
            elif word == "include":
                if rest.startswith('"'):  # <core.p4>, <tna.p4>: Intel's, not read
                    self.text(rest.strip('"'))
            elif word == "error":
                raise P4Unsupported(f"{file}: #error {rest}")
            else:
                raise P4Unsupported(f"{file}: #{word}")
        return "\n".join(out)

    def _holds(self, word: str, rest: str) -> bool:
        if word != "if":
            return (rest in self.macros) == (word == "ifdef")
        expr = _IDENT.sub("0", self.expand(rest))  # a name left undefined is 0, as in C
        return bool(constant(expr))

    def expand(self, text: str, hidden: frozenset[str] = frozenset()) -> str:
        out, at = [], 0
        while (m := _IDENT.search(text, at)) is not None:
            out.append(text[at:m.start()])
            name, at = m.group(), m.end()
            params, body = self.macros.get(name, (None, None))
            if body is None or name in hidden:
                out.append(name)
                continue
            if params is not None:
                args, end = _arguments(text, at)
                if args is None:  # a function-like macro's name alone
                    out.append(name)
                    continue
                if len(args) != len(params):
                    raise P4Unsupported(f"{name}: {len(args)} arguments for {len(params)}")
                at = end
                values = dict(zip(params, (self.expand(a, hidden) for a in args)))
                body = re.sub(r"\s*##\s*", "", _IDENT.sub(lambda t: values.get(t.group(), t.group()), body))
            out.append(self.expand(body, hidden | {name}))
        out.append(text[at:])
        return "".join(out)


def _joined(lines: list[str]) -> Iterable[tuple[str, int]]:
    """Each logical line (a line ending in `\\` goes on in the next) and how many lines it took beyond
    its first."""
    i = 0
    while i < len(lines):
        line, first = lines[i], i
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i]
        i += 1
        yield line, i - first - 1


def _arguments(text: str, at: int) -> tuple[list[str] | None, int]:
    """The comma-separated arguments in the parentheses at `at` (after blanks), and where they end."""
    start = len(text) - len(text[at:].lstrip())
    if start >= len(text) or text[start] != "(":
        return None, at
    args, depth, begin = [], 0, start + 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                args.append(text[begin:i].strip())
                return ([] if args == [""] else args), i + 1
        elif text[i] == "," and depth == 1:
            args.append(text[begin:i].strip())
            begin = i + 1
    raise P4Unsupported(f"unclosed arguments: {text[at:at + 40]!r}")


# -- reading statements and expressions ------------------------------------------------------------

_TOKEN = re.compile(r"\s*(0[xX][0-9a-fA-F]+|\d+|[A-Za-z_]\w*|&&&|\.\.|\+\+|==|!=|&&|\|\||[-+*/|&^~!<>=()\[\]{}:;,.])")
# binary operators by precedence, loosest first (p4c's grammar: `| ^ &` bind tighter than `==`)
_BINARY = [("||",), ("&&",), ("==", "!="), ("|",), ("^",), ("&",), ("++", "+", "-"), ("*", "/")]


def _int(token: str) -> int:
    return int(token, 16) if token[:2].lower() == "0x" else int(token)


class _Reader:
    """A recursive-descent reader of statements and expressions into tuples: ("=", target, value, at),
    ("eval", e, at), ("if", e, then, else, at), ("block", [...], at), each statement's `at` its (file, line)
    or None; ("int", v, type), ("name", n),
    ("field", e, name), ("slice", e, hi, lo), ("cast", type, e), ("call", e, [args]), ("list", [e, ...]),
    (op, a[, b])."""

    def __init__(self, text: str, types: Program | None = None, where: tuple[str, int] | None = None):
        """`where`: the file `text` is in and its offset there, for the statements' positions."""
        self.tokens, self.offsets, at, text = [], [], 0, text.rstrip()
        while at < len(text):
            m = _TOKEN.match(text, at)
            if m is None:
                raise P4Unsupported(f"cannot read {text[at:at + 40]!r}")
            self.tokens.append(m.group(1))
            self.offsets.append(m.start(1))
            at = m.end()
        self.at, self.types, self.where = 0, types, where

    def position(self) -> tuple[str, int] | None:
        """The file and line of the next token (None where the text's place is not known)."""
        if self.where is None or self.types is None or self.at >= len(self.tokens):
            return None
        file, at = self.where
        return self.types.position(file, at + self.offsets[self.at])

    def peek(self, ahead: int = 0) -> str:
        return self.tokens[self.at + ahead] if self.at + ahead < len(self.tokens) else ""

    def take(self, want: str | None = None) -> str:
        token = self.peek()
        if want is not None and token != want:
            raise P4Unsupported(f"expected {want!r}, found {token!r} in {' '.join(self.tokens)[:120]!r}")
        self.at += 1
        return token

    def statements(self) -> list:
        body = []
        while self.peek() not in ("", "}"):
            body.append(self.statement())
        return body

    def statement(self) -> tuple:
        at = self.position()
        if self.peek() == "{":
            self.take()
            body = self.statements()
            self.take("}")
            return ("block", body, at)
        if self.peek() == "if":
            self.take()
            self.take("(")
            cond = self.expression()
            self.take(")")
            then = self.statement()
            other = self.statement() if self.peek() == "else" and self.take() else None
            return ("if", cond, then, other, at)
        target = self.expression()
        if self.peek() == "=":
            self.take()
            value = self.expression()
            self.take(";")
            return ("=", target, value, at)
        self.take(";")
        return ("eval", target, at)

    def expression(self, level: int = 0) -> tuple:
        if level == len(_BINARY):
            return self.unary()
        left = self.expression(level + 1)
        while self.peek() in _BINARY[level]:
            op = self.take()
            left = (op, left, self.expression(level + 1))
        return left

    def unary(self) -> tuple:
        if self.peek() in ("!", "~", "-"):
            op = self.take()
            return ("u" + op, self.unary())
        if self.peek() == "(" and (self.peek(1) in ("bit", "int") and self.peek(2) == "<"
                                   or self.peek(2) == ")" and self.types and self.peek(1) in self.types.typedefs):
            self.take()
            t = self.type()
            self.take(")")
            return ("cast", t, self.unary())
        e = self.primary()
        while self.peek() in (".", "[", "("):
            token = self.take()
            if token == ".":
                e = ("field", e, self.take())
            elif token == "[":
                hi = _int(self.take())
                self.take(":")
                lo = _int(self.take())
                self.take("]")
                e = ("slice", e, hi, lo)
            else:
                args = []
                while self.peek() != ")":
                    args.append(self.expression())
                    if self.peek() == ",":
                        self.take()
                self.take(")")
                e = ("call", e, args)
        return e

    def primary(self) -> tuple:
        token = self.take()
        if token == "(":
            e = self.expression()
            self.take(")")
            return e
        if token == "{":
            items = []
            while self.peek() != "}":
                items.append(self.expression())
                if self.peek() != "}":
                    self.take(",")
            self.take("}")
            return ("list", items)
        if token in ("true", "false"):
            return ("int", int(token == "true"), BOOL)
        if token[:1].isdigit():
            return ("int", _int(token), None)
        if _IDENT.fullmatch(token):
            return ("name", token)
        raise P4Unsupported(f"unexpected {token!r} in {' '.join(self.tokens)[:120]!r}")

    def type(self) -> Type:
        name = self.take()
        if name in ("bit", "int"):
            self.take("<")
            width = _int(self.take())
            self.take(">")
            return Type(width, name == "int")
        t = self.types.kind(name) if self.types else None
        if not isinstance(t, Type):
            raise P4Unsupported(f"cast to {name}")
        return t


def _statements(text: str, program: Program | None = None, where: tuple[str, int] | None = None) -> list:
    reader = _Reader(text, program, where)
    body = reader.statements()
    reader.take("")  # all of it
    return body


def _expression(text: str, program: Program | None = None) -> tuple:
    reader = _Reader(text, program)
    e = reader.expression()
    reader.take("")
    return e


def constant(text: str, program: Program | None = None) -> int:
    """The value of a constant expression (its names: `program`'s constants)."""
    return _Compiler(program).expression(_expression(text, program))[0](None)


# -- declarations ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Entry:
    """One constant entry: per key (value, mask) (mask 0 for `_`, None for "every bit") or a range, its
    action and its arguments."""

    keys: tuple[tuple[int, int | None] | range, ...]
    action: str
    args: tuple[int, ...]
    at: tuple[str, int] | None = dataclasses.field(default=None, compare=False)  # its file and line

    def matches(self, values: tuple[int, ...]) -> bool:
        return all(_matches(value, key) for value, key in zip(values, self.keys, strict=True))


def _matches(value: int, key: tuple[int, int | None] | range) -> bool:
    if isinstance(key, range):
        return value in key
    want, mask = key
    return value == want if mask is None else value & mask == want & mask


@dataclasses.dataclass
class Action:
    params: list[tuple[str, Type]]
    body: list


@dataclasses.dataclass
class Table:
    name: str
    keys: list[tuple[str, tuple]]  # each key's text (the name the control plane matches it by), its expression
    entries: list[Entry] | None  # None: the control plane writes them
    default: tuple[str, tuple[int, ...]]


@dataclasses.dataclass
class RegisterAction:
    register: str
    cell: str  # apply()'s names for the register's cell and for the value handed back
    rv: str | None
    rv_type: Type | None
    body: list


@dataclasses.dataclass
class Control:
    """A control, or a parser (its `states`; no actions or tables)."""

    name: str
    file: str
    params: list[tuple[str, str, str]]  # (direction, type, name)
    actions: dict[str, Action] = dataclasses.field(default_factory=dict)
    tables: dict[str, Table] = dataclasses.field(default_factory=dict)
    registers: dict[str, tuple[str, Type]] = dataclasses.field(default_factory=dict)  # its element type, index
    register_actions: dict[str, RegisterAction] = dataclasses.field(default_factory=dict)
    counters: set[str] = dataclasses.field(default_factory=set)
    instances: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> control
    locals: list[tuple[str, str, tuple | None]] = dataclasses.field(default_factory=list)  # type, name, initializer
    checksums: set[str] = dataclasses.field(default_factory=set)  # its Checksum units
    apply_text: str = ""  # read where the control first runs
    apply_at: tuple[str, int] | None = None  # the file and offset of apply_text
    # a parser's states: name -> (statements, transition: ("goto", state) or ("select", [key expressions],
    # [(keyset, state), ...], (file, line)), a keyset as a constant entry's keys)
    states: dict[str, tuple[list, tuple]] = dataclasses.field(default_factory=dict)


def _items(text: str, at: int = 0) -> list[tuple[str, int]]:
    """`text` cut into its top-level declarations, each with its offset (`text` is at `at`): each ends at a
    `;` or a `}` outside any brace."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0 and ch in ";}":
            item = text[start:i + 1]
            items.append((item.strip(), at + start + len(item) - len(item.lstrip())))
            start = i + 1
    if text[start:].strip():
        raise P4Unsupported(f"unterminated: {text[start:start + 60]!r}")
    return [(item, where) for item, where in items if item not in ("", ";")]


def _braced(text: str, pattern: str) -> tuple[str, int] | None:
    """What the braces after `pattern` hold, and its offset in `text`."""
    m = re.search(pattern + r"\s*\{", text)
    if m is None:
        return None
    depth = 0
    for i in range(m.end() - 1, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[m.end():i], m.end()
    raise P4Unsupported(f"unclosed {pattern}")


def _pieces(text: str, separator: str, at: int) -> Iterable[tuple[str, int]]:
    """`text` (at offset `at`) cut at each `separator`: each piece and its offset."""
    for piece in text.split(separator):
        yield piece, at
        at += len(piece) + len(separator)


def _split(text: str) -> list[str]:
    """`text`'s comma-separated parts, outside parentheses and angle brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, "<": 1, ")": -1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


class Program:
    """The declarations of a folder of P4 files (the TNA program at K = `words`)."""

    def __init__(self, folder: Path, words: int):
        self.folder = folder
        self.typedefs: dict[str, str] = {}
        self.structs: dict[str, list[tuple[str, str]]] = {}  # struct and header fields (type, name), in order
        self.headers: set[str] = set()  # which of them are headers
        self._consts: dict[str, tuple[str, str]] = {}  # name -> type, expression
        self.defines: dict[str, str] = {}  # every object-like macro, expanded
        self._newlines: dict[str, list[int]] = {}  # per file, where its lines end
        controls = []
        for path in sorted(folder.glob("*.p4")):
            pre = _Preprocessor(folder, {"HINA_WORDS": str(words)})
            text = pre.text(path.name)
            self._newlines[path.name] = [i for i, ch in enumerate(text) if ch == "\n"]
            for item, at in _items(text):
                controls += self._declare(item, path.name, at)
            self.defines.update({n: pre.expand(body) for n, (params, body) in pre.macros.items() if params is None})
        for item, at in _items(TNA_INTRINSICS):
            self._declare(item, "tna.p4", at)
        self.controls = {c[1]: self._control(*c[1:]) for c in controls if c[0] == "control"}
        self.parsers = {c[1]: self._parser(*c[1:]) for c in controls if c[0] == "parser"}
        self.tables = {t.name: (c, t) for c in self.controls.values() for t in c.tables.values()}
        self._compiled: dict[str, _Compiler] = {}

    def position(self, file: str, offset: int) -> tuple[str, int]:
        """The file and line (from 1) of `offset` in `file`'s text."""
        return file, bisect.bisect_left(self._newlines.get(file, []), offset) + 1

    def _declare(self, item: str, file: str, at: int) -> list:
        if m := re.fullmatch(r"typedef\s+(.+?)\s+(\w+)\s*;", item, re.S):
            self.typedefs[m[2]] = m[1]
        elif m := re.fullmatch(r"const\s+(.+?)\s+(\w+)\s*=\s*(.+?)\s*;", item, re.S):
            self._consts[m[2]] = (m[1], m[3])
        elif m := re.fullmatch(r"(header|struct)\s+(\w+)\s*\{(.*)\}", item, re.S):
            self.structs[m[2]] = re.findall(r"([\w<>]+)\s+(\w+)\s*;", m[3])
            if m[1] == "header":
                self.headers.add(m[2])
        elif m := re.fullmatch(r"(control|parser)\s+(\w+)\s*\((.*?)\)\s*\{(.*)\}", item, re.S):
            return [(m[1], m[2], file, m[3], m[4], at + m.start(4))]
        elif not re.match(r"\w+\s*\(.*\)\s*\w+\s*;$", item, re.S):  # Pipeline(...) pipe; Switch(pipe) main;
            raise P4Unsupported(f"{file}: {item[:80]!r}")
        return []

    def _control(self, name: str, file: str, params: str, body: str, body_at: int) -> Control:
        control = Control(name, file, [re.fullmatch(r"(?:(in|out|inout)\s+)?(\S+)\s+(\w+)", p).groups()
                                       for p in _split(params)])
        for item, at in _items(body, body_at):
            if m := re.fullmatch(r"action\s+(\w+)\s*\((.*?)\)\s*\{(.*)\}", item, re.S):
                params = [(n, self.kind(t)) for t, n in (p.rsplit(None, 1) for p in _split(m[2]))]
                control.actions[m[1]] = Action(params, _statements(m[3], self, (file, at + m.start(3))))
            elif m := re.fullmatch(r"table\s+(\w+)\s*\{(.*)\}", item, re.S):
                control.tables[m[1]] = self._table(m[1], m[2], (file, at + m.start(2)))
            elif m := re.fullmatch(r"RegisterAction\s*<(.*?)>\s*\(\s*(\w+)\s*\)\s*(\w+)\s*=\s*\{\s*void\s+apply\s*"
                                   r"\((.*?)\)\s*\{(.*)\}\s*\}", item, re.S):
                (_, cell), *rv = [p.split()[-2:] for p in _split(m[4])]  # [type, name] of the cell, [of rv]
                control.register_actions[m[3]] = RegisterAction(
                    m[2], cell, rv[0][1] if rv else None, self.kind(rv[0][0]) if rv else None,
                    _statements(m[5], self, (file, at + m.start(5))))
            elif m := re.fullmatch(r"Register\s*<(.*?)>\s*\(.*\)\s*(\w+)\s*;", item, re.S):
                element, index = _split(m[1])
                control.registers[m[2]] = (element, self.kind(index))
            elif m := re.fullmatch(r"Counter\s*<.*>\s*\(.*\)\s*(\w+)\s*;", item, re.S):
                control.counters.add(m[1])
            elif m := re.fullmatch(r"apply\s*\{(.*)\}", item, re.S):
                control.apply_text, control.apply_at = m[1], (file, at + m.start(1))
            elif m := re.fullmatch(r"Checksum\s*\(\s*\)\s*(\w+)\s*;", item):
                control.checksums.add(m[1])
            elif m := re.fullmatch(r"(\w+)\s*\(\s*\)\s*(\w+)\s*;", item):
                control.instances[m[2]] = m[1]
            elif m := re.fullmatch(r"([\w<>]+)\s+(\w+)\s*(?:=\s*(.+?))?\s*;", item, re.S):
                control.locals.append((m[1], m[2], _expression(m[3], self) if m[3] else None))
            else:
                raise P4Unsupported(f"{file}, control {name}: {item[:80]!r}")
        return control

    def _parser(self, name: str, file: str, params: str, body: str, body_at: int) -> Control:
        parser = Control(name, file, [re.fullmatch(r"(?:(in|out|inout)\s+)?(\S+)\s+(\w+)", p).groups()
                                      for p in _split(params)])
        for item, at in _items(body, body_at):
            if m := re.fullmatch(r"Checksum\s*\(\s*\)\s*(\w+)\s*;", item):
                parser.checksums.add(m[1])
            elif m := re.fullmatch(r"state\s+(\w+)\s*\{(.*)\btransition\b(.*)\}", item, re.S):
                parser.states[m[1]] = (_statements(m[2], self, (file, at + m.start(2))),
                                       self._transition(m[3].strip(), self.position(file, at + m.start(3))))
            else:
                raise P4Unsupported(f"{file}, parser {name}: {item[:80]!r}")
        if "start" not in parser.states:
            raise P4Unsupported(f"{file}, parser {name}: no start state")
        return parser

    def _transition(self, text: str, at: tuple[str, int]) -> tuple:
        """("goto", state) or ("select", [key expressions], [(keyset, state), ...], its file and line)."""
        if m := re.fullmatch(r"(\w+)\s*;", text):
            return ("goto", m[1])
        if not text.startswith("select"):
            raise P4Unsupported(f"transition {text[:60]!r}")
        keys, end = _arguments(text, len("select"))
        cases = _braced(text[end:], "")
        if keys is None or cases is None:
            raise P4Unsupported(f"transition {text[:60]!r}")
        exprs, select = [_expression(k, self) for k in keys], []
        for case in (c for c in cases[0].split(";") if c.strip()):
            keyset, state = (part.strip() for part in case.rsplit(":", 1))
            wild = keyset in ("default", "_")
            select.append((((0, 0),) * len(exprs) if wild else self._keyset(keyset), state))
        return ("select", exprs, select, at)

    def _table(self, name: str, body: str, where: tuple[str, int]) -> Table:
        keys = [k.rsplit(":", 1)[0].strip() for k in (_braced(body, r"\bkey\s*=") or ("",))[0].split(";")
                if k.strip()]
        default = re.search(r"default_action\s*=\s*(\w+)\s*\((.*?)\)\s*;", body)
        entries = _braced(body, r"\bconst\s+entries\s*=")
        if entries is not None:
            file, at = where[0], where[1] + entries[1]
            entries = [self._entry(e, self.position(file, e_at + len(e) - len(e.lstrip())))
                       for e, e_at in _pieces(entries[0], ";", at) if e.strip()]
        default = (default[1], tuple(constant(a, self) for a in _split(default[2]))) if default else ("NoAction", ())
        return Table(name, [(k, _expression(k, self)) for k in keys], entries, default)

    def _entry(self, text: str, at: tuple[str, int]) -> Entry:
        keys, action, args = re.fullmatch(r"\s*(.*?)\s*:\s*(\w+)\s*\((.*)\)\s*", text, re.S).groups()
        return Entry(self._keyset(keys), action, tuple(constant(a, self) for a in _split(args)), at)

    def _keyset(self, keys: str) -> tuple[tuple[int, int | None] | range, ...]:
        """A table entry's or a select case's keys: per key (value, mask) (mask 0 for `_`, None for every
        bit) or a range."""
        if keys.startswith("(") and keys.endswith(")"):
            keys = keys[1:-1]
        parsed = []
        for key in _split(keys):
            if key == "_":
                parsed.append((0, 0))
            elif "&&&" in key:
                parsed.append(tuple(constant(k, self) for k in key.split("&&&")))
            elif ".." in key:
                lo, hi = (constant(k, self) for k in key.split(".."))
                parsed.append(range(lo, hi + 1))
            else:
                parsed.append((constant(key, self), None))
        return tuple(parsed)

    # -- types and values --
    def kind(self, text: str) -> Type | str:
        """bit<W>, int<W>, bool or a typedef of one as a Type; a struct or header by its name."""
        if m := re.fullmatch(r"(bit|int)\s*<\s*(\d+)\s*>", text):
            return Type(int(m[2]), m[1] == "int")
        if text == "bool":
            return BOOL
        if text in self.typedefs:
            return self.kind(self.typedefs[text])
        if text in self.structs or text in PACKET_TYPES:
            return text
        raise P4Unsupported(f"type {text!r}")

    @functools.cache  # noqa: B019 (Programs are cached for the session: `program`)
    def fields(self, struct: str) -> dict[str, Type | str]:
        return {name: self.kind(t) for t, name in self.structs[struct]}

    @functools.cache  # noqa: B019
    def const(self, name: str) -> tuple[int, Type | str]:
        if name not in self._consts:
            raise P4Unsupported(f"unknown name {name}")
        type_text, expr = self._consts[name]
        t = self.kind(type_text)
        return constant(expr, self) & t.mask, t

    def value(self, name: str) -> int:
        """A constant's value, or a numeric macro's."""
        return self.const(name)[0] if name in self._consts else constant(self.defines[name], self)

    def new(self, struct: str, **values) -> Struct | Header:
        """A `struct`, every field 0 but `values`, its headers invalid (a parser has not extracted them); a
        header named on its own is valid (intrinsic metadata: the hardware's, not parsed)."""
        if struct in self.headers:
            header = Header(*self.layout(struct), valid=True)
            for name, value in values.items():
                header[name] = value
            return header
        made = Struct(self._masks(struct), **values)
        for name, t in self.fields(struct).items():
            if isinstance(t, str) and name not in values:
                made[name] = Header(*self.layout(t)) if t in self.headers else self.new(t)
        return made

    @functools.cache  # noqa: B019
    def _masks(self, struct: str) -> dict[str, int | None]:
        return {n: t.mask if isinstance(t, Type) else None for n, t in self.fields(struct).items()}

    @functools.cache  # noqa: B019
    def layout(self, header: str) -> tuple[dict[str, tuple[int, int, int, int]], int]:
        """A header's fields (first byte, end byte, shift, mask) and its size in bytes."""
        fields, offset = {}, 0
        for name, t in self.fields(header).items():
            lo, hi = offset // 8, (offset + t.width + 7) // 8
            fields[name] = (lo, hi, 8 * hi - offset - t.width, t.mask)
            offset += t.width
        if offset % 8:
            raise P4Unsupported(f"header {header}: {offset} bits, not whole bytes")
        return fields, offset // 8

    def coverable(self) -> set[tuple]:
        """Everything a Pipe's `covered` may hold for this program: each statement of every control,
        action, RegisterAction and parser state, both branches of each if, each case of each select, each
        constant entry."""
        found: set[tuple] = set()

        def walk(body: list) -> None:
            for s in body:
                at = s[-1]
                if s[0] in ("=", "eval") and at:
                    found.add(("statement", *at))
                elif s[0] == "block":
                    walk(s[1])
                elif s[0] == "if":
                    found.update({("branch", *at, True), ("branch", *at, False)} if at else ())
                    walk([s[2]] + ([s[3]] if s[3] is not None else []))

        for block in (*self.controls.values(), *self.parsers.values()):
            walk(_statements(block.apply_text, self, block.apply_at))
            for action in block.actions.values():
                walk(action.body)
            for register_action in block.register_actions.values():
                walk(register_action.body)
            for table in block.tables.values():
                found.update(("entry", *e.at) for e in table.entries or () if e.at)
            for body, how in block.states.values():
                walk(body)
                if how[0] == "select":
                    found.update(("branch", *how[3], state) for _, state in how[2])
        return found

    def compiled(self, name: str) -> _Compiler:
        """The control or parser `name`, compiled."""
        if name not in self._compiled:
            self._compiled[name] = _Compiler(self, self.controls.get(name) or self.parsers[name]).compile()
        return self._compiled[name]


@functools.cache
def program(folder: Path = TNA, words: int = 32) -> Program:
    """The program in `folder`, at K = `words` (read once per folder and K)."""
    return Program(Path(folder).resolve(), words)


def const_entries(file: str, table: str, folder: Path = TNA) -> tuple[list[Entry], tuple[str, tuple[int, ...]]]:
    """`table`'s constant entries in `folder`/`file`, in their order (the first has the highest priority),
    and its default action."""
    control, t = program(folder).tables[table]
    assert control.file == file and t.entries is not None, f"no table {table} of constant entries in {file}"
    return t.entries, t.default


# -- running: a control compiled into closures -------------------------------------------------------

class _Activation:
    """What running code reads and writes: the pipe, the name of the control instance in it (which owns its
    registers and counters), the control's variables (parameters and locals) and the running action's (or
    RegisterAction's) own."""

    __slots__ = ("pipe", "path", "vars", "own")

    def __init__(self, pipe: Pipe, path: str, variables: dict, own: dict):
        self.pipe, self.path, self.vars, self.own = pipe, path, variables, own


_ARITHMETIC = {"|": operator.or_, "&": operator.and_, "^": operator.xor, "+": operator.add, "-": operator.sub,
               "*": operator.mul, "/": operator.floordiv}


class _Compiler:
    """One control's or parser's code as closures `f(activation)`; an expression's comes with its type (None:
    an untyped literal)."""

    def __init__(self, program: Program | None, control: Control | None = None):
        self.program, self.control = program, control
        self.vars = ({n: program.kind(t) for _, t, n in control.params} | {n: program.kind(t) for t, n, _ in
                     control.locals}) if control else {}
        self.own: dict[str, Type | str] = {}  # the names of the action (or RegisterAction) being compiled
        self._actions: dict[str, Callable] = {}

    def compile(self) -> _Compiler:
        self.masks = {n: t.mask for n, t in self.vars.items() if isinstance(t, Type)}
        self.locals = [(n, self.expression(init)[0] if init else (lambda a: 0), self.masks.get(n, -1))
                       for _, n, init in self.control.locals]
        self.body = self.statements(_statements(self.control.apply_text, self.program, self.control.apply_at))
        self.states = {name: (self.statements(body), self.transition(how))
                       for name, (body, how) in self.control.states.items()}
        if self.states:
            self.body = self.parse
        return self

    def run(self, pipe: Pipe, path: str, args: dict) -> dict:
        """Apply the control (or run the parser) as the instance `path`: its variables, as it leaves them."""
        variables = {n: v & self.masks[n] if n in self.masks else v for n, v in args.items()}
        variables.update((name, Checksum()) for name in self.control.checksums)
        a = _Activation(pipe, path, variables, {})
        for name, init, mask in self.locals:
            variables[name] = init(a) & mask
        self.body(a)
        return variables

    def parse(self, a: _Activation) -> None:
        """A parser's states from start, until accept or an error stops it (its packet_in keeps the error)."""
        state = "start"
        try:
            while state != "accept":
                if state == "reject":
                    raise P4Unsupported(f"{self.control.name}: transition to reject")
                body, transition = self.states[state]
                body(a)
                state = transition(a)
        except ParserStop:
            return

    def transition(self, how: tuple) -> Callable:
        """The state a transition goes to."""
        if how[0] == "goto":
            state = how[1]
            if state not in self.control.states and state not in ("accept", "reject"):
                raise P4Unsupported(f"{self.control.name}: no state {state}")
            return lambda a: state
        keys = [self.expression(e)[0] for e in how[1]]
        cases = [(Entry(keyset, "", ()), state, ("branch", *how[3], state)) for keyset, state in how[2]]

        def select(a):
            values = tuple(k(a) for k in keys)
            case = next((case for case in cases if case[0].matches(values)), None)
            if case is None:
                packet = next(v for v in a.vars.values() if isinstance(v, PacketIn))
                packet.error = "NoMatch"
                raise ParserStop(packet.error)
            a.pipe.covered.add(case[2])
            return case[1]
        return select

    def _within(self, own: dict) -> _Compiler:
        """This compiler, for the body of an action or RegisterAction with names of its own."""
        inner = copy.copy(self)
        inner.own = own
        return inner

    # -- statements --
    def statements(self, body: list) -> Callable:
        steps = [self.statement(s) for s in body]

        def run(a):
            for step in steps:
                step(a)
        return run

    def statement(self, s: tuple) -> Callable:
        """`s` as a closure; where its place is known, it adds ("statement", file, line) to the pipe's
        `covered` as it runs (an if: ("branch", file, line, the branch taken))."""
        at = s[-1]
        if s[0] in ("=", "eval"):
            run = self.assignment(s[1], s[2]) if s[0] == "=" else self.expression(s[1])[0]
            return _covering(("statement", *at), run) if at else run
        if s[0] == "block":
            return self.statements(s[1])
        cond, then = self.expression(s[1])[0], self.statement(s[2])
        other = self.statement(s[3]) if s[3] is not None else (lambda a: None)
        if at:
            then, other = _covering(("branch", *at, True), then), _covering(("branch", *at, False), other)
        return lambda a: then(a) if cond(a) else other(a)

    def assignment(self, target: tuple, value: tuple) -> Callable:
        store, value = self.store(target), self.expression(value)[0]
        return lambda a: store(a, value(a))

    def store(self, target: tuple) -> Callable:
        """What writes `target` (a name, or a struct's or header's field, which masks it itself)."""
        if target[0] == "name":
            name = target[1]
            where = "own" if name in self.own else "vars" if name in self.vars else None
            if where is None:
                raise P4Unsupported(f"assignment to {name}, not a variable")
            t = (self.own if where == "own" else self.vars)[name]
            mask = t.mask if isinstance(t, Type) else -1
            if where == "own":
                return lambda a, v: a.own.__setitem__(name, v & mask)
            return lambda a, v: a.vars.__setitem__(name, v & mask)
        if target[0] == "field":
            base, name = self.expression(target[1])[0], target[2]
            self._field_type(target)
            return lambda a, v: base(a).__setitem__(name, v)
        raise P4Unsupported(f"assignment to {target}")

    # -- expressions --
    def expression(self, e: tuple) -> tuple[Callable, Type | str | None]:
        op = e[0]
        if op == "int":
            v = e[1]
            return (lambda a: v), e[2]
        if op == "name":
            name = e[1]
            if name in self.own:
                return (lambda a: a.own[name]), self.own[name]
            if name in self.vars:
                return (lambda a: a.vars[name]), self.vars[name]
            if self.program is None:
                raise P4Unsupported(f"unknown name {name}")
            v, t = self.program.const(name)
            return (lambda a: v), t
        if op == "field":
            if e[2] in ("hit", "miss") and e[1][0] == "call":  # t.apply().hit
                apply = self.expression(e[1])[0]
                return (apply if e[2] == "hit" else lambda a: 1 - apply(a)), BOOL
            name, t = e[2], self._field_type(e)
            if e[1][0] == "name" and e[1][1] in self.vars and e[1][1] not in self.own:  # meta.x: one call less
                struct = e[1][1]
                return (lambda a: a.vars[struct][name]), t
            base = self.expression(e[1])[0]
            return (lambda a: base(a)[name]), t
        if op == "call":
            return self.call(e[1], e[2])
        if op == "list":
            return self.concatenation(e[1])
        if op == "slice":
            base, lo, t = self.expression(e[1])[0], e[3], Type(e[2] - e[3] + 1)
            mask = t.mask
            return (lambda a: base(a) >> lo & mask), t
        if op == "cast":
            inner, t = self.expression(e[2])[0], e[1]
            mask = t.mask
            return (lambda a: inner(a) & mask), t
        if op in ("&&", "||"):
            x, y = self.expression(e[1])[0], self.expression(e[2])[0]
            if op == "&&":
                return (lambda a: int(bool(x(a)) and bool(y(a)))), BOOL
            return (lambda a: int(bool(x(a)) or bool(y(a)))), BOOL
        x, tx = self.expression(e[1])
        if op == "u!":
            return (lambda a: int(not x(a))), BOOL
        if op in ("u~", "u-"):
            f = operator.invert if op == "u~" else operator.neg
            mask = tx.mask if isinstance(tx, Type) else -1
            return (lambda a: f(x(a)) & mask), tx
        y, ty = self.expression(e[2])
        t = tx or ty
        mask = t.mask if isinstance(t, Type) else -1
        if op in _ARITHMETIC:
            f = _ARITHMETIC[op]
            return (lambda a: f(x(a), y(a)) & mask), t
        if op in ("==", "!="):
            same = op == "=="
            if e[2][0] == "int" or e[2][0] == "name" and e[2][1] not in self.own and e[2][1] not in self.vars:
                c = y(None) & mask  # a constant: compared as it is masked
                return (lambda a: int((x(a) & mask == c) == same)), BOOL
            return (lambda a: int((x(a) & mask == y(a) & mask) == same)), BOOL
        if op == "++":
            if not (isinstance(tx, Type) and isinstance(ty, Type)):
                raise P4Unsupported("++ of an untyped value")
            return (lambda a: x(a) << ty.width | y(a)), Type(tx.width + ty.width)
        raise P4Unsupported(f"operator {op}")

    def concatenation(self, items: list) -> tuple[Callable, Type]:
        """A list `{a, b, ...}` as one value: its items' bits, the first the highest."""
        parts = [self.expression(item) for item in items]
        if not all(isinstance(t, Type) for _, t in parts):
            raise P4Unsupported("a list of something other than typed scalars")
        parts = [(f, t.width, t.mask) for f, t in parts]

        def value(a):
            v = 0
            for f, width, mask in parts:
                v = v << width | f(a) & mask
            return v
        return value, Type(sum(width for _, width, _ in parts))

    def _bytes(self, e: tuple) -> Callable:
        """What `e` (a header, or a scalar or list of whole bytes) is as bytes: what a Checksum adds."""
        f, t = self.expression(e)
        if isinstance(t, str) and t in self.program.headers:
            return lambda a: bytes(f(a))
        if not isinstance(t, Type) or t.width % 8:
            raise P4Unsupported(f"checksum of {e}: not a header or whole bytes")
        size, mask = t.width // 8, t.mask
        return lambda a: (f(a) & mask).to_bytes(size, "big")

    def _field_type(self, e: tuple) -> Type | str:
        struct = self.expression(e[1])[1]
        if not isinstance(struct, str) or e[2] not in self.program.fields(struct):
            raise P4Unsupported(f"no field {e[2]} in {struct}")
        return self.program.fields(struct)[e[2]]

    def call(self, fn: tuple, args: list) -> tuple[Callable, Type | str | None]:
        if fn == ("name", "max"):  # the stateful ALU's max: signed for int<W>
            (x, tx), (y, ty) = (self.expression(arg) for arg in args)
            t = tx or ty
            mask = t.mask
            return (lambda a: max(x(a) & mask, y(a) & mask, key=t.signed_value)), t
        if fn[0] == "field" and fn[2] == "isValid":
            header = self.expression(fn[1])[0]
            return (lambda a: int(header(a).valid)), BOOL
        if fn[0] == "field" and fn[2] in ("setValid", "setInvalid"):
            header, valid = self.expression(fn[1])[0], fn[2] == "setValid"
            return (lambda a: header(a).set_valid(valid)), None
        if fn[0] == "field" and fn[1][0] == "name" and self.vars.get(fn[1][1]) in PACKET_TYPES:
            return self.packet_call(fn[1][1], fn[2], args), None
        if fn[0] == "field" and fn[1][0] == "name" and self.control and fn[1][1] in self.control.checksums:
            return self.checksum_call(fn[1][1], fn[2], args)
        values = [self.expression(arg)[0] for arg in args]
        control = self.control
        if fn[0] == "name" and control and fn[1] in control.actions:  # an action called directly
            name = fn[1]
            return (lambda a: self.action(name)(a, [v(a) for v in values])), None
        name, method = (fn[1][1], fn[2]) if fn[0] == "field" and fn[1][0] == "name" else (None, None)
        if control is None or name is None:
            raise P4Unsupported(f"call of {fn}")
        if method == "apply" and name in control.tables:
            return self.table(control.tables[name]), None
        if method == "apply" and name in control.instances:
            return self.instance(name, args), None
        if method == "execute" and name in control.register_actions:
            return self.execute(control.register_actions[name], values[0])
        if method == "count" and name in control.counters:
            index = values[0]

            def count(a):
                a.pipe.counters[f"{a.path}.{name}"][index(a)] += 1
            return count, None
        raise P4Unsupported(f"{control.name}: {name}.{method}()")

    def packet_call(self, packet: str, method: str, args: list) -> Callable:
        """packet_in's extract(h) and advance(bits), packet_out's emit(h)."""
        want = {"packet_in": ("extract", "advance"), "packet_out": ("emit",)}[self.vars[packet]]
        if method not in want or len(args) != 1:
            raise P4Unsupported(f"{self.vars[packet]}.{method} with {len(args)} arguments")
        arg = self.expression(args[0])[0]
        return lambda a: getattr(a.vars[packet], method)(arg(a))

    def checksum_call(self, unit: str, method: str, args: list) -> tuple[Callable, Type | None]:
        """A Checksum's add(data), verify(), update(data)."""
        if method == "verify" and not args:
            return (lambda a: a.vars[unit].verify()), BOOL
        if method in ("add", "update") and len(args) == 1:
            data = self._bytes(args[0])
            if method == "add":
                return (lambda a: a.vars[unit].add(data(a))), None
            return (lambda a: Checksum.update(data(a))), Type(16)
        raise P4Unsupported(f"Checksum.{method} with {len(args)} arguments")

    def action(self, name: str) -> Callable:
        """`name`'s body as `f(activation, arguments)`."""
        if name == "NoAction":
            return lambda a, args: None
        if name not in self._actions:
            action = self.control.actions[name]
            body = self._within(dict(action.params)).statements(action.body)
            params = [(p, t.mask) for p, t in action.params]

            def run(a, args):
                body(_Activation(a.pipe, a.path, a.vars, {p: v & m for (p, m), v in zip(params, args, strict=True)}))
            self._actions[name] = run
        return self._actions[name]

    def table(self, table: Table) -> Callable:
        """Applying `table`: the action of the entry its keys match (else its default); 1 if one matched."""
        keys = [self.expression(e)[0] for _, e in table.keys]
        matched: dict[tuple, Entry | None] = {}  # constant entries: key values -> the entry they match

        def apply(a):
            values = tuple(k(a) for k in keys)
            if table.entries is None:
                found = a.pipe.entries[table.name].get(values)
            else:
                if values not in matched:
                    matched[values] = next((e for e in table.entries if e.matches(values)), None)
                entry = matched[values]
                found = None if entry is None else (entry.action, entry.args)
                if entry is not None and entry.at:
                    a.pipe.covered.add(("entry", *entry.at))
            action, args = found or a.pipe.defaults.get(table.name, table.default)
            self.action(action)(a, args)
            return int(found is not None)
        return apply

    def execute(self, action: RegisterAction, index: Callable) -> tuple[Callable, Type | None]:
        """A RegisterAction on its register's cell `index` (a struct, updated in place; or a scalar, its value
        written back); its rv."""
        element, index_type = self.control.registers[action.register]
        kind = self.program.kind(element)
        own = {action.cell: kind} | ({action.rv: action.rv_type} if action.rv else {})
        body = self._within(own).statements(action.body)
        register, cell_name, rv, new = action.register, action.cell, action.rv, self.program.new
        scalar = isinstance(kind, Type)

        def execute(a):
            cells = a.pipe.registers[f"{a.path}.{register}"]
            i = index(a) & index_type.mask
            cell = cells.get(i)
            if cell is None:
                cell = cells[i] = 0 if scalar else new(element)
            variables = {cell_name: cell} | ({rv: 0} if rv else {})
            body(_Activation(a.pipe, a.path, a.vars, variables))
            if scalar:
                cells[i] = variables[cell_name]
            return variables[rv] if rv else 0
        return execute, action.rv_type

    def instance(self, name: str, args: list) -> Callable:
        """Applying the control instance `name`: structs and headers by reference, scalars copied in (in,
        inout) and back out (out, inout)."""
        callee = self.program.controls[self.control.instances[name]]
        bound, back = [], []
        for (direction, type_text, param), arg in zip(callee.params, args, strict=True):
            scalar = isinstance(self.program.kind(type_text), Type)
            bound.append((param, self.expression(arg)[0] if direction != "out" or not scalar else lambda a: 0))
            if scalar and direction in ("out", "inout"):
                back.append((param, self.store(arg)))

        def apply(a):
            variables = self.program.compiled(callee.name).run(a.pipe, f"{a.path}.{name}",
                                                               {p: v(a) for p, v in bound})
            for param, store in back:
                store(a, variables[param])
        return apply


def _covering(what: tuple, run: Callable) -> Callable:
    """`run`, adding `what` to the pipe's `covered` first."""
    def covered(a):
        a.pipe.covered.add(what)
        run(a)
    return covered


class Pipe:
    """One pipe running the program: its registers and counters, and the control plane's table entries
    (objects with `table`, `match` (key text -> value), `action` and `params` (name -> value), the values
    as the controller writes them: decimal, 0x-hex, MAC or IPv4 text) and default actions it set
    (`defaults`: table -> (action, params))."""

    def __init__(self, program: Program, entries: Iterable = (), defaults: dict | None = None):
        self.program = program
        self.registers: dict[str, dict[int, Struct | int]] = collections.defaultdict(dict)  # "path.register"
        self.counters: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        # what has run: ("statement", file, line), ("branch", file, line, the branch or state taken),
        # ("entry", file, line) of a constant entry matched
        self.covered: set[tuple] = set()
        self.entries: dict[str, dict[tuple, tuple[str, tuple[int, ...]]]] = collections.defaultdict(dict)
        for e in entries:
            control, table = program.tables[e.table]
            params = () if e.action == "NoAction" else control.actions[e.action].params  # core.p4's: no parameters
            self.entries[e.table][tuple(_plane_value(e.match[k]) for k, _ in table.keys)] = (
                e.action, tuple(_plane_value(e.params[p]) for p, _ in params))
        self.defaults: dict[str, tuple[str, tuple[int, ...]]] = {}
        for name, (action, values) in (defaults or {}).items():
            control, _ = program.tables[name]
            self.defaults[name] = (action, tuple(_plane_value(values[p]) for p, _ in control.actions[action].params))

    def apply(self, control: str, path: str, **args) -> dict:
        """Apply the control (or run the parser) `control` as the instance `path`, its parameters bound to
        `args` (structs, headers, a `PacketIn` or `PacketOut` by reference); its variables come back, with
        what it left in its out and inout scalars."""
        declared = self.program.controls.get(control) or self.program.parsers[control]
        params = {name for _, _, name in declared.params}
        if set(args) != params:
            raise TypeError(f"{control} takes {sorted(params)}, not {sorted(args)}")
        return self.program.compiled(control).run(self, path, args)


def _plane_value(text: str) -> int:
    if ":" in text:
        return int(text.replace(":", ""), 16)
    if "." in text:
        return int(ipaddress.IPv4Address(text))
    return int(text, 0)
