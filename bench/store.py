#!/usr/bin/env python3
"""bench/store: trainrun's TCPStore next to PyTorch 1.13's on the same
machine in one run.

    bench/store.py [--repeats 3] [--quick]

Rows: set, get and add operations per second summed over 1, 4 and 16 client
processes; rendezvous time (every client connects, adds to a counter, the
last sets "done", all wait for it) for 64, 256 and 1024 clients, run as
threads in up to 16 processes. Columns: the trainrun stack (our server,
our C++ client), the PyTorch stack (its server, its Python client), and
PyTorch's client against our server, which isolates the server. Each cell is
the median of --repeats runs. Timing starts when every client process has
connected (ops) or is up (rendezvous: connecting is part of it) and ends
when the last finishes.

PyTorch 1.13's server binds every interface, so the whole benchmark runs in
a private network namespace (unshare --net) when it can."""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
CLIENT = ROOT / "bazel-bin" / "bench" / "store_client"
PYTHON = "/usr/bin/python3"

TORCH_SERVER = textwrap.dedent("""
    import datetime, sys, torch.distributed as dist
    s = dist.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=600), wait_for_workers=False)
    print(s.port, flush=True)
    sys.stdin.read()
""")

TORCH_OPS = textwrap.dedent("""
    import datetime, sys, time, torch.distributed as dist
    port, op, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    s = dist.TCPStore("127.0.0.1", port, 1, False, datetime.timedelta(seconds=120), wait_for_workers=False)
    value = b"x" * 32
    if op == "get":
        s.set("bench/get", value)
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic_ns()
    if op == "set":
        for i in range(n):
            s.set(f"k{i % 100}", value)
        s.num_keys()  # sets have no reply: one round trip to know they were all served
    elif op == "get":
        for i in range(n):
            s.get("bench/get")
    else:
        for i in range(n):
            s.add("counter", 1)
    print(start, time.monotonic_ns(), flush=True)
""")

TORCH_RENDEZVOUS = textwrap.dedent("""
    import datetime, sys, threading, time, torch.distributed as dist
    port, world, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic_ns()
    def client():
        s = dist.TCPStore("127.0.0.1", port, 1, False, datetime.timedelta(seconds=120), wait_for_workers=False)
        if s.add("rdzv/count", 1) == world:
            s.set("rdzv/done", b"1")
        s.wait(["rdzv/done"])
    ts = [threading.Thread(target=client) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(start, time.monotonic_ns(), flush=True)
""")


class Server:
    """A store server process; kind is "trainrun" or "torch"."""

    def __init__(self, kind):
        if kind == "trainrun":
            self.proc = subprocess.Popen([str(TRAINRUN), "store", "--listen", "127.0.0.1:0"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True)
            self.port = int(self.proc.stdout.readline().split()[-1].rsplit(":", 1)[1])
        else:
            self.proc = subprocess.Popen([PYTHON, "-c", TORCH_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True)
            self.port = int(self.proc.stdout.readline())

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def run_clients(commands):
    """Starts every client, waits for all "ready", says "go", and returns the
    seconds from the first start to the last finish."""
    procs = [subprocess.Popen(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for c in commands]
    try:
        for p in procs:
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"client {p.args} failed to start: {line!r}")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        spans = []
        for p in procs:
            out, _ = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"client {p.args} exited with {p.returncode}")
            spans.append(tuple(int(x) for x in out.split()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e9


def client_command(client, mode, port, *args):
    if client == "trainrun":
        return [str(CLIENT), mode, str(port), *map(str, args)]
    script = TORCH_OPS if mode == "ops" else TORCH_RENDEZVOUS
    return [PYTHON, "-c", script, str(port), *map(str, args)]


def ops_per_second(server_kind, client, op, procs, total_ops, repeats):
    n = max(500, total_ops // procs)
    rates = []
    for _ in range(repeats):
        server = Server(server_kind)
        try:
            seconds = run_clients([client_command(client, "ops", server.port, op, n) for _ in range(procs)])
        finally:
            server.close()
        rates.append(n * procs / seconds)
    return statistics.median(rates)


def rendezvous_seconds(server_kind, client, world, repeats):
    nprocs = min(16, world)
    times = []
    for _ in range(repeats):
        server = Server(server_kind)
        try:
            cmds = [client_command(client, "rendezvous", server.port, world, world // nprocs) for _ in range(nprocs)]
            times.append(run_clients(cmds))
        finally:
            server.close()
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="fewer operations per row (a smoke run)")
    p.add_argument("--only-trainrun", action="store_true", help="skip the PyTorch columns")
    args = p.parse_args()

    if os.environ.get("TRAINRUN_BENCH_NETNS") != "1" and shutil.which("unshare") and shutil.which("ip"):
        env = dict(os.environ, TRAINRUN_BENCH_NETNS="1")
        cmd = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", PYTHON, *sys.argv]
        r = subprocess.run(cmd, env=env)
        if r.returncode == 0:
            return 0
        print("bench/store: could not run in a private network namespace; running in this one", file=sys.stderr)
    for path in (TRAINRUN, CLIENT):
        if not path.exists():
            subprocess.run(["bazel", "build", "//launcher:trainrun", "//bench:store_client"], cwd=ROOT, check=True)
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    stacks = [("trainrun", "trainrun", "trainrun")]
    have_torch = have_torch and not args.only_trainrun
    if have_torch:
        stacks += [("PyTorch", "torch", "torch"), ("torch->ours", "trainrun", "torch")]
    total_ops = 4000 if args.quick else 20000

    rows = []
    for op in ("set", "get", "add"):
        for procs in (1, 4, 16):
            cells = [ops_per_second(srv, cli, op, procs, total_ops, args.repeats) for _, srv, cli in stacks]
            rows.append((f"{op} ops/s, {procs} client process{'es' if procs > 1 else ''}", "ops/s", cells, True))
    for world in (64, 256, 1024):
        cells = [rendezvous_seconds(srv, cli, world, args.repeats) * 1000 for _, srv, cli in stacks]
        rows.append((f"rendezvous, {world} clients", "ms", cells, False))

    print(f"store: medians of {args.repeats} runs; peer: "
          f"{'PyTorch ' + __import__('torch').__version__ if have_torch else 'skipped' if args.only_trainrun else 'none (python3-torch not installed)'}")
    names = [name for name, _, _ in stacks]
    header = f"| {'row':34} | {'unit':5} | " + " | ".join(f"{n:>11}" for n in names) + " | ratio |"
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    for label, unit, cells, higher_is_better in rows:
        values = " | ".join(f"{c:11.0f}" if unit == "ops/s" else f"{c:11.1f}" for c in cells)
        if have_torch:
            ratio = cells[0] / cells[1] if higher_is_better else cells[1] / cells[0]
            ratio_text = f"{ratio:5.2f}"
        else:
            ratio_text = "  n/a"
        print(f"| {label:34} | {unit:5} | {values} | {ratio_text} |")
    print("ratio: trainrun stack over the PyTorch stack (higher is better for both kinds of row)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
