#!/usr/bin/env python3
"""bench/agent: what the launcher agent's service costs and how fast it answers.

    bazel build //launcher:trainrun //proto:agent_py && bench/agent.py [--runs 30] [--clients 100]

Rows:
- job start to first worker: from spawning `trainrun --nproc 1 --no-python /bin/date +%s%N` to the time the
  worker prints, with and without `--agent-port 0` (median of --runs, interleaved);
- GetStatus latency (p50, p99) with 1 client and with --clients concurrent clients (threads of this
  process, each with its own channel), against a job whose worker sleeps.
torchrun has no such service, so there is no peer column."""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
sys.path.insert(0, str(ROOT / "bazel-bin" / "proto"))


def start_to_first_worker(extra):
    t0 = time.time_ns()
    out = subprocess.run([str(TRAINRUN), *extra, "--nproc", "1", "--no-python", "/bin/date", "+%s%N"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    stamp = next(int(line.split(":", 1)[1]) for line in out.splitlines() if line.startswith("[rank0]:"))
    return (stamp - t0) / 1e6


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def status_latencies(port, clients, calls):
    import agent_pb2
    import grpc
    latencies, lock, barrier = [], threading.Lock(), threading.Barrier(clients)

    def client():
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            get = channel.unary_unary("/trainrun.agent.v1.Agent/GetStatus",
                                      request_serializer=agent_pb2.GetStatusRequest.SerializeToString,
                                      response_deserializer=agent_pb2.GetStatusResponse.FromString)
            get(agent_pb2.GetStatusRequest(), timeout=30)  # connect first
            barrier.wait()
            mine = []
            for _ in range(calls):
                t = time.perf_counter()
                get(agent_pb2.GetStatusRequest(), timeout=30)
                mine.append((time.perf_counter() - t) * 1e3)
            with lock:
                latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--calls", type=int, default=50, help="GetStatus calls per client")
    args = ap.parse_args()
    if not TRAINRUN.exists():
        sys.exit(f"build the launcher first: bazel build //launcher:trainrun //proto:agent_py ({TRAINRUN})")
    without, with_service = [], []
    for _ in range(args.runs):  # interleaved, so drift hits both alike
        without.append(start_to_first_worker([]))
        with_service.append(start_to_first_worker(["--agent-port", "0"]))

    sleeper = ROOT / "bench" / ".agent_sleeper.py"
    sleeper.write_text("import time\ntime.sleep(600)\n")
    job = subprocess.Popen([str(TRAINRUN), "--agent-port", "0", "--nproc", "1", str(sleeper)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        port = None
        while port is None:
            line = job.stdout.readline()
            if not line:
                sys.exit("the job ended before its agent service started")
            if "agent service on 127.0.0.1:" in line:
                port = int(line.rsplit(":", 1)[1])
        one = status_latencies(port, 1, args.calls * 4)
        many = status_latencies(port, args.clients, args.calls)
    finally:
        os.killpg(job.pid, 9)
        job.wait()
        sleeper.unlink()

    print(f"{'row':52s} {'value':>12s}")
    print("-" * 65)
    print(f"{'job start to first worker, no agent service (ms)':52s} {statistics.median(without):12.2f}")
    print(f"{'job start to first worker, --agent-port 0 (ms)':52s} {statistics.median(with_service):12.2f}")
    print(f"{'  difference of the medians (ms)':52s} "
          f"{statistics.median(with_service) - statistics.median(without):12.2f}")
    print(f"{'GetStatus p50 / p99, 1 client (ms)':52s} {percentile(one, 50):5.2f} / {percentile(one, 99):5.2f}")
    print(f"{f'GetStatus p50 / p99, {args.clients} concurrent clients (ms)':52s} "
          f"{percentile(many, 50):5.2f} / {percentile(many, 99):5.2f}")


if __name__ == "__main__":
    main()
