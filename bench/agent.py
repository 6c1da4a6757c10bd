#!/usr/bin/env python3
"""bench/agent: what the launcher agent's service costs and how fast it answers.

    bazel build //launcher:trainrun //proto:agent_py //bench:flight_recorder_cost && bench/agent.py [--runs 30]

Rows:
- job start to first worker: from spawning `trainrun --nproc 1 --no-python /bin/date +%s%N` to the time the
  worker prints, with and without `--agent-port 0` (median of --runs, interleaved);
- GetStatus latency (p50, p99) with 1 client and with --clients concurrent clients (threads of this
  process, each with its own channel), against a job whose worker sleeps;
- the flight recorder's cost: a 4 KiB allreduce (2 ranks, shared memory and Gloo's TCP) with the recorder on
  (the default) and off (TRAINRUN_FR_BUFFER_SIZE=0), medians of --fr-runs interleaved jobs; these differ by
  less than this machine's run-to-run noise, so the recorder's own cost is also timed without a network
  (bench/flight_recorder_cost.cc: a group wrapper over a backend whose works finish at once) and set against
  the shared-memory allreduce.
torchrun has no such service, and PyTorch 1.13 no flight recorder for Gloo, so there is no peer column."""
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


# One job: rank 0 prints the mean microseconds of a 4 KiB allreduce over `iters` calls (after a warm-up).
ALLREDUCE_LOOP = """
import os, time, trainrun as torch, trainrun.distributed as dist
dist.init_process_group("gloo")
t, iters = torch.ones(1024), int(os.environ["ITERS"])
for _ in range(300):
    dist.all_reduce(t)
start = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(t)
elapsed = time.perf_counter() - start
if dist.get_rank() == 0:
    print("US_PER_ALLREDUCE", elapsed / iters * 1e6)
"""


def allreduce_us(script, buffer_size, tcp, iters):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), ITERS=str(iters), TRAINRUN_FR_BUFFER_SIZE=buffer_size,
               OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    if tcp:
        env["TRAINRUN_SHM_COLLECTIVES"] = "0"
    out = subprocess.run([str(TRAINRUN), "--nproc", "2", str(script)], capture_output=True, text=True, check=True,
                         timeout=300, env=env).stdout
    return float(next(line.split()[-1] for line in out.splitlines() if "US_PER_ALLREDUCE" in line))


def flight_recorder_cost(runs, iters):
    script = ROOT / "bench" / ".allreduce_loop.py"
    script.write_text(ALLREDUCE_LOOP)
    rows = []
    try:
        for tcp in (False, True):
            on, off = [], []
            for _ in range(runs):  # interleaved
                on.append(allreduce_us(script, "2000", tcp, iters))
                off.append(allreduce_us(script, "0", tcp, iters))
            rows.append(("tcp" if tcp else "shared memory", statistics.median(on), statistics.median(off)))
    finally:
        script.unlink()
    return rows


def recorder_ns_per_call(buffer_size):
    out = subprocess.run([str(ROOT / "bazel-bin" / "bench" / "flight_recorder_cost")], capture_output=True, text=True,
                         check=True, timeout=300, env=dict(os.environ, TRAINRUN_FR_BUFFER_SIZE=buffer_size)).stdout
    return float(out.split()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--calls", type=int, default=50, help="GetStatus calls per client")
    ap.add_argument("--fr-runs", type=int, default=7, help="jobs per flight-recorder setting and transport")
    ap.add_argument("--fr-iters", type=int, default=3000, help="allreduces per flight-recorder job")
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
    allreduces = flight_recorder_cost(args.fr_runs, args.fr_iters)
    for transport, on, off in allreduces:
        print(f"{f'4 KiB allreduce, {transport}, flight recorder on / off (us)':52s} {on:5.1f} / {off:5.1f}")
    ns_on = statistics.median(recorder_ns_per_call("2000") for _ in range(3))
    ns_off = statistics.median(recorder_ns_per_call("0") for _ in range(3))
    shm_us = allreduces[0][2]
    print(f"{'group wrapper per call, recorder on / off (ns)':52s} {ns_on:5.0f} / {ns_off:5.0f}")
    print(f"{'  the recorder, % of a shared-memory 4 KiB allreduce':52s} "
          f"{(ns_on - ns_off) / (shm_us * 1000) * 100:12.2f}")


if __name__ == "__main__":
    main()
