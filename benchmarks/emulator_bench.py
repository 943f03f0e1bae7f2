"""Emulator benchmark: packet rate against a bare UDP echo server, pipes, and hina vs dense end to end.

Packet rate.  The server under test runs as its own process(es): the hina
emulator (`python -m hina.emulator --pipes P`, one job of N = 2 workers
per client, so every packet is combined and every completion is
multicast: one RESULT out per UPDATE in) or a bare Python UDP echo server
given the same P (P processes on one SO_REUSEPORT port, steered by slot
like the emulator's pipes; one datagram out per datagram in; one recvfrom
and one sendto each).  The emulator batches (one recvmmsg, one compiled
pass over the batch, one sendmmsg); with P = 1 it also runs with
--no-batch (one system call per packet, the rules called per frame), to
show what the batching buys.  C client
processes (C = P by default) each keep `--window` packets in flight per
worker socket with pre-built frames, for K = 32 and for the largest K that
fits a 9000-byte MTU, for each P in --pipes.  Two rates are reported per
server: achieved packets per second (wall clock, limited by whichever of
clients and server is slower; on a machine with fewer cores than P plus
the clients, that is the cores) and capacity, packets per second of the
server processes' own CPU time (utime + stime from /proc, summed over the
pipes), which does not depend on the clients.  Targets: P = 1 at least
0.8 of the echo; P pipes at least 0.7 x P the one-pipe rate (given cores).

End to end.  `hina demo` runs (emulator + 4 worker processes on loopback)
for d = 2^24 at densities from 0.1% to 100% in dense, blocks and auto
mode.  Each worker aggregates --rounds times with reused buffers, as a
training loop does: the first aggregation (page faults of fresh buffers
included) is reported apart, the best later one is the steady state; the
best of --repeat runs is kept.  The pipes section (--pipes-e2e) runs dense
and auto at 100% density with --pipes-workers (8) workers for P = 1 and the
best P of the packet rates: seconds and dense-equivalent Gbit/s (32 d bits
per aggregation over its seconds).

Writes emulator_bench.json and emulator_e2e.png beside it (--out; default: $HINA_RESULTS, else hina-results/).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from hina.cliargs import OneLineParser, between, fraction, pipes_flag, positive
from hina.codec.params import MAX_WORKERS
from hina.control.client import ControlClient
from hina.control.config import JobConfig, Member
from hina.control.controller import P4_WORDS
from hina.emulator.pipes import reuseport_group
from hina.host.demo import DemoConfig, run_demo
from hina.host.job import DEFAULT_WORDS, JobSpec
from hina.provenance import command_line, default_out, out_help, out_path, write_result
from hina.wire.headers import pack_header, unpack_header
from hina.wire.sockio import set_buffers

TICKS = os.sysconf("SC_CLK_TCK")
KS = (P4_WORDS, DEFAULT_WORDS)  # K of the P4 program's packets, and of a jumbo frame's


def echo_server(pipes: int) -> None:
    """The baseline: receive a datagram, send it back, nothing else; P processes on one port."""
    socks = reuseport_group(("127.0.0.1", 0), pipes, set_buffers)
    pids = [os.getpid()]
    for sock in socks[1:]:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _echo(sock)
        pids.append(pid)
    def stop(*_):
        for pid in pids[1:]:
            os.kill(pid, signal.SIGKILL)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    print(json.dumps({"data": list(socks[0].getsockname()), "pids": pids}), flush=True)
    _echo(socks[0])


def _echo(sock: socket.socket) -> None:
    recvfrom, sendto = sock.recvfrom, sock.sendto
    while True:
        data, peer = recvfrom(65536)
        sendto(data, peer)


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def start(cmd: list[str]) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    return proc, json.loads(proc.stdout.readline())


def drive(target: tuple[str, int], socks: list[socket.socket], words: int, window: int,
          seconds: float, job: int = 1, slot_base: int = 0) -> int:
    """Closed loop: on every reply for (slot, copy) send the frame for (slot, other copy)."""
    frames = []
    for w, _ in enumerate(socks):
        payload = bytes(4 * words)
        frames.append({(slot, v): pack_header(0, 0, job, w, 0, (v << 15) | slot, slot * words, words, 0) + payload
                       for slot in range(slot_base, slot_base + window) for v in (0, 1)})
    sel = selectors.DefaultSelector()
    for w, s in enumerate(socks):
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, w)
        for slot in range(slot_base, slot_base + window):
            s.send(frames[w][(slot, 0)])
    replies = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for key, _ in sel.select(0.05):
            s, w = key.fileobj, key.data
            while True:
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    break
                pool_index = unpack_header(data)[5]
                replies += 1
                s.send(frames[w][(pool_index & 0x7FFF, (pool_index >> 15) ^ 1)])
    sel.close()
    return replies


def _client(kind: str, where: dict, client: int, words: int, window: int, seconds: float, go, conn) -> None:
    """One client process: its own worker sockets (and job, on the emulator), a warm-up, then the
    measured closed loop once `go` is set; sends back the replies counted."""
    target = tuple(where["data"])
    socks = []
    for _ in range(1 if kind == "echo" else 2):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        set_buffers(s)
        s.bind(("127.0.0.1", 0))
        s.connect(target)
        socks.append(s)
    job, base = 1 + client, client * window
    if kind != "echo":
        with ControlClient(tuple(where["control"])) as ctl:
            ctl.add_job(JobConfig(job, 2, words, base, window,
                                  tuple(Member(w, s.getsockname()) for w, s in enumerate(socks))))
    drive(target, socks, words, window, 0.3, job, base)  # warm up
    conn.send("ready")
    go.wait()
    conn.send(drive(target, socks, words, window, seconds, job, base))


def packet_rate(kind: str, words: int, window: int, seconds: float, pipes: int = 1,
                clients: int | None = None) -> dict:
    if kind == "echo":
        proc, where = start([sys.executable, __file__, "--echo-server", str(pipes)])
        pids = where["pids"]
    else:
        extra = ["--no-batch"] if kind == "emulator-per-packet" else []
        proc, where = start([sys.executable, "-m", "hina.emulator", "--pipes", str(pipes), *extra])
        with ControlClient(tuple(where["control"])) as ctl:
            pids = [proc.pid] + ctl.status().get("pids", [])
    clients = clients or pipes
    ctx = mp.get_context("fork")
    go = ctx.Event()
    try:
        links, procs = [], []
        for c in range(clients):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_client, args=(kind, where, c, words, window, seconds, go, child), daemon=True)
            p.start()
            links.append(parent)
            procs.append(p)
        for link in links:
            assert link.recv() == "ready"
        cpu0, t0 = cpu_seconds(pids), time.monotonic()
        go.set()
        replies = sum(link.recv() for link in links)
        cpu1, t1 = cpu_seconds(pids), time.monotonic()
        for p in procs:
            p.join()
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # one packet in per packet out, for both servers
    return {"server": kind, "words": words, "pipes": pipes, "clients": clients, "packets": replies,
            "seconds": t1 - t0, "achieved_pps": replies / (t1 - t0), "server_cpu_s": cpu1 - cpu0,
            "capacity_pps": replies / max(cpu1 - cpu0, 1e-9)}


E2E_MODES = ("dense", "blocks", "auto")


def speed(base: float, seconds: float) -> str:
    """'2.31x faster than' or '0.76x of (slower than)', for `seconds` against `base`."""
    ratio = base / seconds
    return f"{ratio:.2f}x faster than" if ratio >= 1 else f"{ratio:.2f}x the speed of (slower than)"


def end_to_end(length: int, density: float, mode: str, workers: int, repeat: int, rounds: int,
               pipes: int = 1) -> dict:
    runs = []
    for r in range(repeat):
        runs.append(run_demo(DemoConfig(workers=workers, length=length, density=density, mode=mode, seed=r,
                                        job=JobSpec(), rounds=rounds, pipes=pipes)))
    best = min(runs, key=lambda s: s["seconds"])
    return {"mode": mode, "density": density, "length": length, "workers": workers, "pipes": pipes,
            "dense_equivalent_gbps": 32 * length / best["seconds"] / 1e9,
            "exact": all(s["exact"] for s in runs), "seconds": best["seconds"],
            "first_seconds": best["first_seconds"], "round_seconds": best["round_seconds"],
            "all_seconds": [s["seconds"] for s in runs], "bytes_per_worker": best["bytes_per_worker"],
            "retransmissions": best["retransmissions"], "phase_seconds": best["phase_seconds"],
            "compute_seconds": best["compute_seconds"], "encoding": best["encoding"], "group": best["group"]}


def plot(e2e: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    densities = sorted({r["density"] for r in e2e})
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    width = 0.38
    width = 0.8 / len(E2E_MODES)
    for i, mode in enumerate(E2E_MODES):
        secs = [next(r["seconds"] for r in e2e if r["mode"] == mode and r["density"] == d) for d in densities]
        xs = [j + (i - (len(E2E_MODES) - 1) / 2) * width for j in range(len(densities))]
        ax.bar(xs, secs, width, label=mode)
    ax.set_xticks(range(len(densities)), [f"{d:.1%}" for d in densities])
    ax.set_xlabel("per-worker density")
    ax.set_ylabel("seconds per aggregation (steady state)")
    ax.set_yscale("log")
    ax.set_title(f"d = 2^24, {e2e[0]['workers']} workers, emulator on loopback")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = OneLineParser(prog="emulator_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--echo-server", type=pipes_flag, metavar="P", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=positive, default=3.0, help="measurement time per packet-rate run")
    ap.add_argument("--window", type=between(1), default=64, help="packets in flight per client socket")
    ap.add_argument("--pipes", type=pipes_flag, nargs="+", default=[1, 2, 4, 8],
                    help="packet rates for these P (switch pipes, echo processes; default 1 2 4 8)")
    ap.add_argument("--clients", type=between(0, 64), default=0, help="client processes per run (default: P)")
    ap.add_argument("--length", type=between(1), default=1 << 24)
    ap.add_argument("--densities", type=fraction, nargs="+", default=[0.001, 0.01, 0.05, 0.1, 0.3, 1.0])
    ap.add_argument("--rounds", type=between(1), default=3,
                    help="aggregations per worker process (first reported apart)")
    ap.add_argument("--workers", type=between(1, MAX_WORKERS), default=4)
    ap.add_argument("--repeat", type=between(1), default=2)
    ap.add_argument("--skip-e2e", action="store_true")
    ap.add_argument("--pipes-e2e", type=pipes_flag, nargs="*", default=None, metavar="P",
                    help="end to end with pipes: dense and auto at 100%% density for these P "
                         "(default: 1 and the best P of the packet rates; none: skip)")
    ap.add_argument("--pipes-workers", type=between(1, MAX_WORKERS), default=8,
                    help="workers in the pipes end to end section")
    ap.add_argument("--out", type=out_path, default=default_out("emulator_bench.json"),
                    help=out_help("emulator_bench.json", "the JSON result, emulator_e2e.png beside it"))
    return ap.parse_args(argv)


def packet_rates(args: argparse.Namespace) -> list[dict]:
    """The packet rate of each server (the echo, the emulator, and with one pipe the emulator per packet) for
    each K and P."""
    rates = []
    for words in KS:
        for pipes in args.pipes:
            for kind in ("echo", "emulator") + (("emulator-per-packet",) if pipes == 1 else ()):
                r = packet_rate(kind, words, args.window, args.seconds, pipes, args.clients or None)
                rates.append(r)
                print(f"K={words:<5d} P={pipes} {kind:<19s} achieved {r['achieved_pps']:>9,.0f} pkt/s   "
                      f"capacity {r['capacity_pps']:>9,.0f} pkt/s per server CPU second "
                      f"({r['clients']} client processes)", flush=True)
    return rates


def rate_of(rates: list[dict], kind: str, words: int, pipes: int) -> dict:
    return next(r for r in rates if r["server"] == kind and r["words"] == words and r["pipes"] == pipes)


def against_echo(rates: list[dict], pipes_run: list[int]) -> tuple[dict, dict]:
    """The emulator's rates over the echo's at the same K and P (achieved and capacity; with one pipe, per
    packet too), and P pipes' achieved rate over one pipe's, each printed against its target."""
    ratios, scaling = {}, {}
    for words in KS:
        for pipes in pipes_run:
            echo, emu = rate_of(rates, "echo", words, pipes), rate_of(rates, "emulator", words, pipes)
            ratios[f"{words}/{pipes}"] = {"achieved": emu["achieved_pps"] / echo["achieved_pps"],
                                          "capacity": emu["capacity_pps"] / echo["capacity_pps"]}
            if pipes == 1:
                one = rate_of(rates, "emulator-per-packet", words, 1)
                ratios[f"{words}/1/per-packet"] = {"achieved": one["achieved_pps"] / echo["achieved_pps"],
                                                   "capacity": one["capacity_pps"] / echo["capacity_pps"]}
                print(f"K={words} P=1 --no-batch (one system call per packet): emulator / echo = "
                      f"{one['achieved_pps'] / echo['achieved_pps']:.2f} achieved, "
                      f"{one['capacity_pps'] / echo['capacity_pps']:.2f} capacity", flush=True)
            print(f"K={words} P={pipes}: emulator / echo = {ratios[f'{words}/{pipes}']['achieved']:.2f} achieved, "
                  f"{ratios[f'{words}/{pipes}']['capacity']:.2f} capacity" + (" (target >= 0.8)" if pipes == 1 else ""),
                  flush=True)
            if 1 in pipes_run and pipes > 1:
                one = rate_of(rates, "emulator", words, 1)["achieved_pps"]
                scaling[f"{words}/{pipes}"] = emu["achieved_pps"] / one
                print(f"K={words} P={pipes}: {emu['achieved_pps'] / one:.2f}x the one-pipe rate "
                      f"(target >= {0.7 * pipes:.1f}x given {pipes} + clients cores; this machine has "
                      f"{os.cpu_count()})", flush=True)
    return ratios, scaling


def end_to_end_runs(args: argparse.Namespace) -> tuple[list[dict], list[str]]:
    """`hina demo` at every density in every mode (none with --skip-e2e), and each density's verdict on the
    targets: auto within 5% of the better of dense and blocks, and at 1% at least 3x faster than dense."""
    e2e, targets = [], []
    if args.skip_e2e:
        return e2e, targets
    for density in args.densities:
        for mode in E2E_MODES:
            r = end_to_end(args.length, density, mode, args.workers, args.repeat, args.rounds)
            e2e.append(r)
            print(f"d=2^{args.length.bit_length() - 1} p={density:.1%} {mode:<6s} {r['seconds']:.3f} s "
                  f"(runs {', '.join(f'{s:.3f}' for s in r['all_seconds'])}; first aggregation "
                  f"{r['first_seconds']:.3f} s), ran {r['encoding']}, exact={r['exact']}, "
                  f"{r['bytes_per_worker']:,.0f} B/worker, {r['retransmissions']} retransmissions", flush=True)
    for density in args.densities:
        t = {m: next(r for r in e2e if r["density"] == density and r["mode"] == m)["seconds"] for m in E2E_MODES}
        best = min(t["dense"], t["blocks"])
        verdict = "met" if t["auto"] <= 1.05 * best else "MISSED"
        line = (f"p={density:.1%}: auto {speed(t['dense'], t['auto'])} dense; auto / best of dense and blocks "
                f"= {t['auto'] / best:.2f} (target <= 1.05: {verdict})")
        if density == 0.01:
            line += f"; target >= 3x dense: {'met' if t['dense'] >= 3 * t['auto'] else 'MISSED'}"
        targets.append(line)
        print(line)
    return e2e, targets


def pipes_end_to_end(args: argparse.Namespace, best_pipes: int) -> list[dict]:
    """Dense and auto at 100% density through P pipes: one and the best P of the packet rates (or --pipes-e2e)."""
    runs = []
    for pipes in sorted({1, best_pipes}) if args.pipes_e2e is None else args.pipes_e2e:
        for mode in ("dense", "auto"):
            r = end_to_end(args.length, 1.0, mode, args.pipes_workers, args.repeat, args.rounds, pipes)
            runs.append(r)
            print(f"pipes: P={pipes} {mode:<5s} {args.pipes_workers} workers d=2^{args.length.bit_length() - 1} "
                  f"{r['seconds']:.3f} s, {r['dense_equivalent_gbps']:.2f} Gbit/s dense-equivalent, "
                  f"exact={r['exact']}, {r['retransmissions']} retransmissions", flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.echo_server:
        echo_server(args.echo_server)
        return 0
    rates = packet_rates(args)
    ratios, scaling = against_echo(rates, args.pipes)
    best_pipes = max(args.pipes, key=lambda p: sum(rate_of(rates, "emulator", w, p)["achieved_pps"] for w in KS))
    e2e, targets = end_to_end_runs(args)
    pipes_e2e = pipes_end_to_end(args, best_pipes)
    write_result(args.out, {"packet_rate": rates, "ratios": ratios, "scaling": scaling, "best_pipes": best_pipes,
                            "end_to_end": e2e, "pipes_end_to_end": pipes_e2e, "targets": targets},
                 command_line("benchmarks/emulator_bench.py", argv))
    print(f"wrote {args.out}")
    if e2e and plot(e2e, args.out.with_name("emulator_e2e.png")):
        print(f"wrote {args.out.with_name('emulator_e2e.png')}")
    return 0 if all(r["exact"] for r in e2e + pipes_e2e) else 1


if __name__ == "__main__":
    sys.exit(main())
