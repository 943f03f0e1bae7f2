# hina: every target sets up what it needs; `make test` on a fresh clone just works.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
# Debian's Python modules (Mininet) live here; pyenv's interpreter does not search it.
DEBIAN_PY := /usr/lib/python3/dist-packages

.PHONY: install test bench demo clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "hina needs Python >= 3.11"'
	$(PYTHON) -m venv --system-site-packages $(VENV)
	@# appended after the venv's own site-packages, so the venv's packages win
	echo $(DEBIAN_PY) > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-debian-dist-packages.pth"
	@# --ignore-installed: keep every dependency inside the venv, whatever pyenv or Debian hold
	$(PY) -m pip install --quiet --ignore-installed -e '.[test,plot]'
	rm -f $(VENV)/.installed-*
	touch $@

test: install
	$(PY) -m pytest

bench: install
	$(PY) benchmarks/codec_bench.py
	$(PY) benchmarks/emulator_bench.py

# the main job: emulator on loopback + 4 workers, 2^22-element gradients at 1%, verified exact
demo: install
	$(VENV)/bin/hina demo --workers 4 --length 4194304 --density 0.01 --mode hina

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
