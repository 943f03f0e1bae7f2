"""`import hina`'s front door: `from hina import *` gives hina's public names, nothing else."""

import json
import subprocess
import sys

import hina

TORCH_ONLY = {"SwitchAllreduce", "switch_allreduce_hook"}  # need the torch extra: named, never star-imported
SCRIPT = """
import json, sys
before = set(dir())
from hina import *
print(json.dumps({"names": sorted(set(dir()) - before - {"before"}), "torch": "torch" in sys.modules}))
"""


def test_star_import_gives_the_public_names_and_nothing_else():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout)
    assert set(got["names"]) == set(hina._WHERE) - TORCH_ONLY  # not `annotations`, `importlib`
    assert not got["torch"]  # a star import loads no torch
    assert sorted(hina.__all__) == sorted(set(hina._WHERE) - TORCH_ONLY)
