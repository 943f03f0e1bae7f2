"""Emulator benchmark: packet rate against a bare UDP echo server, and hina vs dense end to end.

Packet rate.  The server under test runs as its own process: the hina
emulator (`python -m switch_emulator`, one job of N = 2 workers, so every
packet is combined and every completion is multicast: one RESULT out per
UPDATE in) or a bare Python UDP echo server (one datagram out per datagram
in).  A closed-loop client in this process keeps `--window` packets in
flight per worker socket with pre-built frames, for K = 32 and for the
largest K that fits a 9000-byte MTU.  Two rates are reported per server:
achieved packets per second (wall clock, limited by whichever of client
and server is slower on this 2-core machine) and capacity, packets per
second of the server process's own CPU time (utime + stime from /proc),
which does not depend on the client.

End to end.  `hina demo` runs (emulator + 4 worker processes on loopback)
for d = 2^24 at densities from 0.1% to 100% in dense, blocks and auto
mode.  Each worker aggregates --rounds times with reused buffers, as a
training loop does: the first aggregation (page faults of fresh buffers
included) is reported apart, the best later one is the steady state; the
best of --repeat runs is kept.

Writes benchmarks/results/emulator_bench.json and emulator_e2e.png.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # runnable as a script from a checkout

from host.demo import DemoConfig, run_demo  # noqa: E402
from host.job import JobSpec  # noqa: E402
from switch_emulator.control import ControlClient  # noqa: E402
from switch_emulator.config import JobConfig, Member  # noqa: E402
from switch_emulator.headers import max_words, pack_header, unpack_header  # noqa: E402
from switch_emulator.udp import set_buffers  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TICKS = os.sysconf("SC_CLK_TCK")


def echo_server() -> None:
    """The baseline: receive a datagram, send it back, nothing else."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    set_buffers(sock)
    sock.bind(("127.0.0.1", 0))
    print(json.dumps({"data": list(sock.getsockname())}), flush=True)
    recvfrom, sendto = sock.recvfrom, sock.sendto
    while True:
        data, peer = recvfrom(65536)
        sendto(data, peer)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start(cmd: list[str]) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    return proc, json.loads(proc.stdout.readline())


def drive(target: tuple[str, int], socks: list[socket.socket], words: int, window: int,
          seconds: float) -> int:
    """Closed loop: on every reply for (slot, copy) send the frame for (slot, other copy)."""
    frames = []
    for w, _ in enumerate(socks):
        payload = bytes(4 * words)
        frames.append({(slot, v): pack_header(0, 0, 1, w, 0, (v << 15) | slot, slot * words, words, 0) + payload
                       for slot in range(window) for v in (0, 1)})
    sel = selectors.DefaultSelector()
    for w, s in enumerate(socks):
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, w)
        for slot in range(window):
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


def packet_rate(kind: str, words: int, window: int, seconds: float) -> dict:
    if kind == "echo":
        proc, where = start([sys.executable, __file__, "--echo-server"])
    else:
        proc, where = start([sys.executable, "-m", "switch_emulator"])
    try:
        target = tuple(where["data"])
        socks = []
        for _ in range(2 if kind == "emulator" else 1):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            set_buffers(s)
            s.bind(("127.0.0.1", 0))
            s.connect(target)
            socks.append(s)
        if kind == "emulator":
            with ControlClient(tuple(where["control"])) as ctl:
                ctl.add_job(JobConfig(1, 2, words, 0, window,
                                      tuple(Member(w, s.getsockname()) for w, s in enumerate(socks))))
        drive(target, socks, words, window, 0.3)  # warm up
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        replies = drive(target, socks, words, window, seconds)
        cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
        for s in socks:
            s.close()
    finally:
        proc.kill()
        proc.wait()
    # one packet in per packet out, for both servers
    return {"server": kind, "words": words, "packets": replies, "seconds": t1 - t0,
            "achieved_pps": replies / (t1 - t0), "server_cpu_s": cpu1 - cpu0,
            "capacity_pps": replies / max(cpu1 - cpu0, 1e-9)}


E2E_MODES = ("dense", "blocks", "auto")


def speed(base: float, seconds: float) -> str:
    """'2.31x faster than' or '0.76x of (slower than)', for `seconds` against `base`."""
    ratio = base / seconds
    return f"{ratio:.2f}x faster than" if ratio >= 1 else f"{ratio:.2f}x the speed of (slower than)"


def end_to_end(length: int, density: float, mode: str, workers: int, repeat: int, rounds: int) -> dict:
    runs = []
    for r in range(repeat):
        runs.append(run_demo(DemoConfig(workers=workers, length=length, density=density, mode=mode, seed=r,
                                        job=JobSpec(), rounds=rounds)))
    best = min(runs, key=lambda s: s["seconds"])
    return {"mode": mode, "density": density, "length": length, "workers": workers,
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=3.0, help="measurement time per packet-rate run")
    ap.add_argument("--window", type=int, default=64, help="packets in flight per client socket")
    ap.add_argument("--length", type=int, default=1 << 24)
    ap.add_argument("--densities", type=float, nargs="+", default=[0.001, 0.01, 0.05, 0.1, 0.3, 1.0])
    ap.add_argument("--rounds", type=int, default=3, help="aggregations per worker process (first reported apart)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-e2e", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS / "emulator_bench.json")
    args = ap.parse_args(argv)
    if args.echo_server:
        echo_server()
        return 0

    rates = []
    for words in (32, max_words(9000)):
        for kind in ("echo", "emulator"):
            r = packet_rate(kind, words, args.window, args.seconds)
            rates.append(r)
            print(f"K={words:<5d} {kind:<8s} achieved {r['achieved_pps']:>9,.0f} pkt/s   "
                  f"capacity {r['capacity_pps']:>9,.0f} pkt/s per server CPU second", flush=True)
    ratios = {}
    for words in (32, max_words(9000)):
        echo = next(r for r in rates if r["server"] == "echo" and r["words"] == words)
        emu = next(r for r in rates if r["server"] == "emulator" and r["words"] == words)
        ratios[words] = {"achieved": emu["achieved_pps"] / echo["achieved_pps"],
                         "capacity": emu["capacity_pps"] / echo["capacity_pps"]}
        print(f"K={words}: emulator / echo = {ratios[words]['achieved']:.2f} achieved, "
              f"{ratios[words]['capacity']:.2f} capacity (target >= 0.5)", flush=True)

    e2e, targets = [], []
    if not args.skip_e2e:
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

    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
            "date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": platform.platform(),
            "cpus": os.cpu_count(), "python": platform.python_version()}
    args.out.write_text(json.dumps({"meta": meta, "packet_rate": rates, "ratios": ratios, "end_to_end": e2e,
                                    "targets": targets}, indent=1))
    print(f"wrote {args.out}")
    if e2e and plot(e2e, args.out.with_name("emulator_e2e.png")):
        print(f"wrote {args.out.with_name('emulator_e2e.png')}")
    return 0 if all(r["exact"] for r in e2e) else 1


if __name__ == "__main__":
    sys.exit(main())
