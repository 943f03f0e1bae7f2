"""The switch's registers are declared once (switch_emulator/registers.py): the C structs its docstring gives
another data plane to mirror are the numpy dtypes the kernels read, field by field and byte for byte, and the
pipeline's control plane and compiled rules meet in them by name."""

from __future__ import annotations

import re

import numpy as np
import pytest

from hina.control import JobConfig, Member
from hina.emulator import Pipeline
from hina.emulator import registers as reg
from hina.wire.headers import HEADER_BYTES, Drop, Flags, HinaHeader, pack_header

C_TYPES = {"int64_t": np.dtype(np.int64), "uint8_t": np.dtype(np.uint8)}


def c_structs(doc: str) -> dict[str, list[tuple[str, np.dtype, tuple[int, ...]]]]:
    """The `struct NAME { TYPE field[N][M]; ... };  /* DTYPE */` blocks of a docstring, by the dtype named
    in their comment: (field, type, dimensions) in order."""
    structs = {}
    for dtype_name, body in re.findall(r"struct \w+ \{\s*/\* (\w+) \*/(.*?)\};", doc, re.S):
        fields = re.findall(r"(\w+_t)\s+(\w+)((?:\[\d+\])*);", body)
        structs[dtype_name] = [(name, C_TYPES[ctype], tuple(int(d) for d in re.findall(r"\d+", dims)))
                               for ctype, name, dims in fields]
    return structs


def numpy_fields(dtype: np.dtype) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
    return [(name, dtype.fields[name][0].base, dtype.fields[name][0].shape) for name in dtype.names]


@pytest.mark.parametrize("name", ["JOB", "COPY", "COUNTERS"])
def test_the_c_structs_in_the_docstring_are_the_dtypes(name):
    structs = c_structs(reg.__doc__)
    dtype = getattr(reg, name)
    assert structs[name] == numpy_fields(dtype)
    # no padding: each field right after the one before, as a C compiler lays out 8-byte fields and byte arrays
    offsets = [dtype.fields[f][1] for f in dtype.names]
    sizes = [dtype.fields[f][0].itemsize for f in dtype.names]
    assert offsets == [sum(sizes[:i]) for i in range(len(sizes))] and dtype.itemsize == sum(sizes)


def test_the_struct_check_fails_on_a_swapped_field():
    swapped = reg.__doc__.replace("int64_t updates;", "int64_t UPDATES_TMP;").replace(
        "int64_t results;", "int64_t updates;").replace("int64_t UPDATES_TMP;", "int64_t results;")
    assert c_structs(swapped)["JOB"] != numpy_fields(reg.JOB)


def test_the_control_plane_and_the_compiled_rules_meet_in_named_fields():
    """What `add_job` writes by name (the job's shape, its members' source ids) is what the compiled rules
    read, and what they count lands in the fields the listing reads."""
    p = Pipeline()
    p.add_job(JobConfig(3, 2, 4, 8, 2, (Member(0, ("127.0.0.1", 7000)), Member(1, ("127.0.0.1", 7001)))))
    row = p.jobs[3].register
    assert (int(row["workers"]), int(row["words"]), int(row["slot_base"]), int(row["slots"]), int(row["full"])) == \
        (2, 4, 8, 2, 0b11)
    assert int(row["worker_source"][0]) == reg.udp_source_id("127.0.0.1", 7000)
    assert (row["worker_source"][2:] == reg.NO_MEMBER).all() and int(row["parents"]) == 0
    frame = pack_header(0, 0, 3, 1, 0, 9, 0, 4, 0) + bytes(16)
    assert p.update(frame, ("127.0.0.1", 7001)) is None  # the first of two: taken in
    assert HinaHeader.unpack(p.update(frame, ("127.0.0.1", 7001)).frame).flags == Flags.PENDING  # again: a duplicate
    assert p.update(frame[:HEADER_BYTES], ("127.0.0.1", 7000)) is None  # truncated
    assert int(row["updates"]) == 1 and int(row["drops"][Drop.DUPLICATE]) == 1
    assert int(p.jobs[3].copies["bitmap"][2]) == 0b10 and int(p.jobs[3].copies["counter"][2]) == 1  # slot 9's copy 0
    assert p.frames == 3 and p.drops == {Drop.DUPLICATE: 1, Drop.TRUNCATED: 1}
    assert p.counters()["jobs"][3] == {"updates": 1, "results": 0, "resends": 0, "pending": 1,
                                       "drops": {"duplicate": 1, "truncated": 1}}
