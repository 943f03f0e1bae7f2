"""The switch as an eBPF/XDP program: hina's slot rules in the kernel, on every frame a port receives.

`hina_xdp.c` is the program (the P4 program's controls, as `hina.emulator.controls` has them);
`layout` declares its tables and generates the C header it includes from `hina.wire.headers`;
`build` compiles it once per machine (clang, `make install`); `libbpf` loads and drives it through
libbpf.so.1; `tables` is its control plane, the emulator's `Pipeline` interface over the BPF maps;
`testrun` runs frames through it without a network (BPF_PROG_TEST_RUN); `switch` attaches it to a
switch's interfaces behind the emulator's control port (`python -m hina.emulator --raw ... --xdp`).
docs/switch.md, "The XDP switch", says how it runs, what it holds and what it costs.
"""
