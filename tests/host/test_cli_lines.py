"""What `hina`'s command line says, in-process (no fleet of processes): a refusal in one line naming the
file and exit status 2, every flag's default said once and right, every count with its noun's number."""

import numpy as np
import pytest

from hina.host.cli import main


@pytest.mark.parametrize("array,message", [
    (np.float32(3.0), "a 0-d array (a scalar); a gradient has at least one dimension"),
    (np.zeros(0, np.float32), "an empty array (shape (0,)); a gradient has at least one element"),
    (np.zeros((0, 4), np.float32), "an empty array (shape (0, 4)); a gradient has at least one element"),
    (np.ones(5, np.int64), "dtype int64 is not a gradient's (float16, float32, float64 or int32)"),
    (np.ones(5, np.complex64), "dtype complex64 is not a gradient's (float16, float32, float64 or int32)"),
])
def test_roundtrip_refuses_an_array_the_codec_cannot_take_in_one_line(tmp_path, capsys, array, message):
    """Each worker's file alike (same shape, same dtype): the codec's own checks would be next."""
    bad = tmp_path / "bad.npy"
    np.save(bad, array)
    assert main(["roundtrip", str(bad), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == f"hina roundtrip: {bad}: {message}\n"
