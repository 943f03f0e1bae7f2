# hina: every target sets up what it needs; `make test` on a fresh clone just works.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
# Debian's Mininet module lives here; pyenv's interpreter does not search it.  The venv
# sees that one module (a symlink in .venv/debian) and nothing else from outside.
DEBIAN_MININET := /usr/lib/python3/dist-packages/mininet

.PHONY: install venv kernels xdp corpus lint test test-fast bench tables reproduce demo mininet-demo fuzz soak p4 tofino testgen clean

# the venv, the kernels compiled for this machine (so that no first run waits on a compiler), the XDP switch
# where clang and libbpf exist, the corpus
install: venv kernels xdp corpus

# the .venv with hina and its extras (pip; redone when pyproject.toml or constraints.txt changes)
venv: $(STAMP)

# numba's kernels, each group compiled by one process, in parallel (seconds; nothing once compiled)
kernels: $(STAMP)
	@$(VENV)/bin/hina compile

# the switch as an XDP program (hina.emulator.xdp), compiled by clang once per machine; where clang or
# libbpf's headers are missing it says so and succeeds
xdp: $(STAMP)
	@$(PY) -m hina.emulator.xdp.build

# the time-to-accuracy corpus: NumPy 2.1.3's documentation sources, 20 MB from PyPI, checked by sha256
corpus: $(STAMP)
	@$(PY) -m hina.host.corpus fetch

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "hina needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	mkdir -p $(VENV)/debian && ln -sfn $(DEBIAN_MININET) $(VENV)/debian/mininet
	echo "$(CURDIR)/$(VENV)/debian" > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-debian-mininet.pth"
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,plot,torch,ns3]'
	rm -f $(VENV)/.installed-*
	touch $@

lint: install
	$(PY) -m ruff check .

# the whole suite (root, Mininet, BMv2 and torch tests run where this machine has them; skipped, with
# the reason, where not), after the linter (docs/contributing.md, "Test lanes and markers": its time and count)
test: lint
	$(PY) -m pytest

# what needs no root, no fleet of processes and no network, for the edit-test loop (docs/contributing.md: its time)
test-fast: lint
	$(PY) -m pytest -m "not slow and not root and not mininet and not bmv2"

# the codec's and the emulator's benchmarks into benchmarks/results/, then the tables that show them
bench: install
	$(PY) benchmarks/codec_bench.py --out benchmarks/results/codec_bench.json
	$(PY) benchmarks/emulator_bench.py --out benchmarks/results/emulator_bench.json
	$(PY) tools/tables.py

# every table in README.md and docs/ from benchmarks/results/*.json (make test checks they match)
tables: install
	$(PY) tools/tables.py

# re-measure headline claims here into a scratch folder and check them against the committed figures
# (docs/reproduce.md; `make reproduce CLAIM=demo`, sudo for the Mininet claims; without CLAIM: the claims);
# QUOTA=100%: all of it under that CPU quota (systemd's CPUQuota: one core's time), as a slower machine
CLAIM ?=
QUOTA ?=
reproduce: install
	$(PY) tools/reproduce.py $(if $(QUOTA),--cpu-quota $(QUOTA)) $(CLAIM)

# the main job: emulator on loopback + 4 workers, 2^22-element gradients at 1%, verified exact
demo: install
	$(VENV)/bin/hina demo --workers 4 --length 4194304 --density 0.01 --mode auto

# the fuzz harness at length (the test suite runs 100,000 frames)
FRAMES ?= 2000000
fuzz: install
	$(PY) benchmarks/fuzz_bench.py --frames $(FRAMES)

# 8 workers, 2^22 elements, 5% drop + 1% dup + 1% reorder, for a minute: exact, memory flat
soak: install
	$(PY) benchmarks/soak.py --seconds 60

# a small Mininet experiment (root): 3 workers through the emulator, 1% link loss, auto and dense
mininet-demo: install
	$(PY) mininet/run.py --workers 3 --switch emulator --mode both --bw 1000 --loss 1 \
		--length 1048576 --density 0.01

# compile the P4 program for BMv2 (needs p4c; without it, say so and succeed)
p4:
	@if command -v p4c >/dev/null 2>&1; then \
		mkdir -p p4/build && \
		p4c --target bmv2 --arch v1model --std p4-16 \
			--p4runtime-files p4/build/hina.p4info.txtpb -o p4/build p4/hina.p4 && \
		echo "compiled p4/hina.p4 into p4/build/"; \
	else \
		echo "p4c is not on PATH: p4/hina.p4 was not compiled (install p4c and BMv2 to use the BMv2 target)"; \
	fi

# compile p4/tna/hina.p4 for Tofino 1 (tna) and Tofino 2 (t2na) into p4/tna/build/ with Intel's open-source
# Tofino back end of p4c ($$P4C_TOFINO, else /opt/p4c-tofino/bin/p4c, built by tools/p4-toolchain.sh --tofino);
# without it, say so and succeed.  docs/tofino.md has the resource tables (python tools/tofino_report.py --measure).
P4C_TOFINO ?= /opt/p4c-tofino/bin/p4c
TOFINO_ENV = LD_LIBRARY_PATH=$(abspath $(dir $(P4C_TOFINO))../lib)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}
tofino:
	@if $(TOFINO_ENV) $(P4C_TOFINO) --version >/dev/null 2>&1; then \
		for chip in tofino:tna tofino2:t2na; do \
			target=$${chip%%:*}; arch=$${chip##*:}; out=p4/tna/build/$$target; \
			rm -rf $$out && mkdir -p $$out && \
			echo "$(P4C_TOFINO) --target $$target --arch $$arch -o $$out p4/tna/hina.p4" && \
			$(TOFINO_ENV) $(P4C_TOFINO) --target $$target --arch $$arch --std p4-16 -g --create-graphs \
				--bf-rt-schema $$out/bfrt.json --p4runtime-files $$out/hina.p4info.txtpb \
				--p4runtime-force-std-externs -o $$out p4/tna/hina.p4 || exit 1; \
			python3 tools/tofino_report.py --summary $$out; \
		done; \
		echo "compiled p4/tna/hina.p4 into p4/tna/build/tofino and p4/tna/build/tofino2"; \
	else \
		echo "no Tofino compiler at $(P4C_TOFINO): p4/tna/hina.p4 was not compiled (build it with" \
			"tools/p4-toolchain.sh --tofino, or set P4C_TOFINO)"; \
	fi

# p4testgen's tests of both P4 programs (built by tools/p4-toolchain.sh --testgen): generated with a fixed seed
# into tests/testgen/ by every p4testgen installed (a target without one keeps its stored tests), then run:
# the BMv2 program's on simple_switch_grpc (as root; `make p4` first) and, those that configure only MAC
# forwarding, on the emulator; the TNA program's on its model (docs/p4.md#p4testgen)
testgen: install
	$(PY) tools/testgen.py
	$(PY) -m pytest tests/p4/test_testgen.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
