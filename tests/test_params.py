"""CodecParams: validation, JSON round trip, agreement checks, exact sketch sizing."""

import json

import pytest

from codec import CodecParams


def test_round_trip_through_json():
    p = CodecParams(length=1000, workers=4, dtype="float16", lanes=256, cells_per_element=1.5, seeds=(7, 8, 9))
    q = CodecParams.from_config(json.loads(p.to_json()))
    assert p == q and hash(p) == hash(q)
    assert p.fingerprint() == q.fingerprint()


def test_fingerprint_and_compatibility_catch_any_difference():
    a = CodecParams(length=1000, workers=4)
    b = CodecParams(length=1000, workers=4, lanes=512)
    assert a.fingerprint() != b.fingerprint()
    a.check_compatible(CodecParams(length=1000, workers=4))
    with pytest.raises(ValueError, match="lanes: 1024 != 512"):
        a.check_compatible(b)


def test_sketch_rows_use_exact_decimal_factor():
    # 1.3 * 30 / 3 is 13.000000000000002 in floating point; the rows must be 13
    assert CodecParams(length=10, workers=1).sketch_rows(30) == 13
    assert CodecParams(length=10, workers=1).sketch_rows(31) == 14
    assert CodecParams(length=10, workers=1).sketch_rows(0) == 1


@pytest.mark.parametrize("kwargs,match", [
    (dict(length=0, workers=1), "length"),
    (dict(length=10, workers=0), "workers"),
    (dict(length=10, workers=33), "workers"),
    (dict(length=10, workers=2, dtype="int64"), "unsupported dtype"),
    (dict(length=10, workers=2, mode="sparse"), "mode"),
    (dict(length=10, workers=2, lanes=0), "lanes"),
    (dict(length=10, workers=2, cells_per_element=0), "cells_per_element"),
    (dict(length=10, workers=2, cells_per_element=float("nan")), "cells_per_element"),
    (dict(length=10, workers=2, seeds=(1, 1, 2)), "seeds"),
    (dict(length=10, workers=2, seeds=(1, 2)), "seeds"),
    (dict(length=10, workers=2, max_union=0), "max_union"),
    (dict(length=10, workers=2, max_union=1.5), "max_union"),
    (dict(length=10, workers=2, max_union=float("nan")), "max_union"),
])
def test_invalid_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CodecParams(**kwargs)


def test_unknown_config_keys_are_refused():
    with pytest.raises(ValueError, match="unknown codec parameters: colour"):
        CodecParams.from_config({"length": 1, "workers": 1, "colour": "red"})
