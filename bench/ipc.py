#!/usr/bin/env python3
"""bench/ipc: tensors between processes, trainrun.multiprocessing next to
torch.multiprocessing (PyTorch 1.13 from apt, and 2.6 from the peer chroot
when it is there), each library in its own process, in one run.

- Queue latency: a fresh tensor put in one process until it is taken in
  the other (half a ping-pong; the put includes moving the tensor into shared
  memory, as both libraries do), 1 KiB, 1 MiB and 256 MiB; median of many.
- Queue throughput: a stream of fresh tensors, messages/s and GB/s.
- DataLoader: images/s of a small image pipeline (3x32x32 crops and flips in
  NumPy, batch 64) with 0, 1 and 2 workers.

    bench/ipc.py [ROUNDS]   (default 3 rounds per library, interleaved; each cell is the median
                             over rounds; OPENBLAS_CORETYPE is set when unset)"""
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"
SIZES = [("1 KiB", 256), ("1 MiB", 1 << 18), ("256 MiB", 1 << 26)]  # float32 elements


def _pong(inbox, outbox, n):
    for _ in range(n):
        t = inbox.get()
        outbox.put(t.numel())


def _drain(inbox, outbox, n):
    for _ in range(n):
        inbox.get()
    outbox.put(n)


class Images:
    """A dataset whose items cost what an augmentation pipeline costs: a random crop and flip of a
    40x40 image, normalised, as float32 3x32x32."""

    def __init__(self, torch, n=2048):
        import numpy as np
        self.torch, self.n = torch, n
        self.images = np.random.default_rng(0).integers(0, 255, (64, 3, 40, 40), dtype=np.uint8)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import numpy as np
        rng = np.random.default_rng(i)
        y, x = rng.integers(0, 9, 2)
        crop = self.images[i % 64, :, y:y + 32, x:x + 32].astype(np.float32) / 255.0
        if rng.random() < 0.5:
            crop = crop[:, :, ::-1]
        crop = (crop - 0.5) / 0.25
        return self.torch.from_numpy(np.ascontiguousarray(crop)), int(i % 10)


def measure(lib):
    if lib == "trainrun":
        sys.path.insert(0, str(ROOT / "python"))
        import trainrun as torch
    else:
        import torch
    mp = torch.multiprocessing
    ctx = mp.get_context("fork")
    out = {"version": getattr(torch, "__version__", "trainrun")}
    for name, numel in SIZES:
        reps = 5 if numel >= 1 << 26 else 200
        inbox, outbox = mp.Queue() if lib == "trainrun" else ctx.Queue(), ctx.Queue()
        child = ctx.Process(target=_pong, args=(inbox, outbox, reps))
        child.start()
        samples = []
        for _ in range(reps):
            t = torch.ones(numel)
            start = time.perf_counter()
            inbox.put(t)
            outbox.get()
            samples.append((time.perf_counter() - start) / 2)
            del t
        child.join()
        samples.sort()
        out[f"latency {name}"] = samples[len(samples) // 2]
        count = 8 if numel >= 1 << 26 else (2000 if numel <= 256 else 300)
        inbox, outbox = mp.Queue() if lib == "trainrun" else ctx.Queue(), ctx.Queue()
        child = ctx.Process(target=_drain, args=(inbox, outbox, count))
        child.start()
        tensors = [torch.ones(numel) for _ in range(min(count, 8))]  # fresh tensors, made before the clock
        start = time.perf_counter()
        for i in range(count):
            inbox.put(tensors[i % len(tensors)] if numel >= 1 << 26 else torch.ones(numel))
        outbox.get()
        elapsed = time.perf_counter() - start
        child.join()
        out[f"throughput {name}"] = (count / elapsed, count * numel * 4 / elapsed / 1e9)
    dataset = Images(torch)
    for workers in (0, 1, 2):
        loader = torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=workers)
        start = time.perf_counter()
        seen = sum(images.shape[0] for images, _ in loader)
        out[f"DataLoader {workers} workers"] = seen / (time.perf_counter() - start)
    return out


def run(lib):
    env = dict(os.environ, OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    if lib == "torch 2.6":
        cmd = ["timeout", "600", str(PEER / "enter.sh"), "python3", "/peer/bench/ipc.py", "--measure", "torch"]
    else:
        cmd = ["/usr/bin/python3", str(ROOT / "bench" / "ipc.py"), "--measure", lib]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return None, (done.stderr or done.stdout)[-400:]
    return json.loads(lines[-1][len("RESULT "):]), None


def _medians(rounds):
    def median(values):
        values = sorted(values)
        return values[len(values) // 2]
    out = {}
    for key, value in rounds[0].items():
        if isinstance(value, list):
            out[key] = [median([r[key][i] for r in rounds]) for i in range(len(value))]
        elif isinstance(value, (int, float)):
            out[key] = median([r[key] for r in rounds])
    return out


def main():
    libs = ["trainrun", "torch 1.13"] + (["torch 2.6"] if pathlib.Path("/opt/trixie/usr/bin/python3").exists()
                                         else [])
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    runs = {lib: [] for lib in libs}
    for _ in range(rounds):  # interleaved, so a noisy minute hurts every library alike
        for lib in libs:
            got, error = run("torch" if lib == "torch 1.13" else lib)
            if got is None:
                print(f"# {lib}: failed: {error.strip().splitlines()[-1] if error.strip() else 'no output'}")
            else:
                runs[lib].append(got)
    results = {lib: _medians(got) for lib, got in runs.items() if got}
    libs = list(results)
    print(f"# median of {rounds} rounds per cell")
    print(f"{'':32}" + "".join(f"{lib:>22}" for lib in libs))
    print("-" * (32 + 22 * len(libs)))
    for name, _ in SIZES:
        print(f"{'Queue latency ' + name + ' (µs)':32}" +
              "".join(f"{results[lib]['latency ' + name] * 1e6:>22.0f}" for lib in libs))
    for name, _ in SIZES:
        print(f"{'Queue throughput ' + name:32}" + "".join(
            f"{results[lib]['throughput ' + name][0]:>11.0f} msg/s {results[lib]['throughput ' + name][1]:>5.2f}GB/s"
            [:22].rjust(22) for lib in libs))
    for workers in (0, 1, 2):
        key = f"DataLoader {workers} workers"
        print(f"{key + ' (img/s)':32}" + "".join(f"{results[lib][key]:>22.0f}" for lib in libs))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":  # one library, one round, as JSON
        print("RESULT " + json.dumps(measure(sys.argv[2])))
    else:
        main()
