"""Measurement scripts: each runs as `python benchmarks/NAME.py` (or `python -m hina.benchmarks.NAME`) and
writes its result, with its provenance, under `benchmarks/results/` (docs/benchmarks.md)."""
