"""One rank of bench/dtensor.py, the same code for both sides: argv[1] is
"trainrun" (run under trainrun's launcher, `import trainrun as torch`) or
"torch" (PyTorch 2.6 in the peer chroot, under torchrun); argv[2] the row.
Rank 0 prints "RESULT <name> <value>" lines (microseconds or milliseconds)."""
import statistics
import sys
import time

LIB, ROW = sys.argv[1], sys.argv[2]
if LIB == "trainrun":
    import pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
    import trainrun as torch
else:
    import torch
    torch.set_num_threads(1)

if LIB == "trainrun":
    import trainrun.distributed as dist
    import trainrun.nn as nn
    import trainrun.nn.functional as F
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import Replicate, Shard, distribute_tensor
    from trainrun.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
else:
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


def timed(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def per_call(fn, calls=2000):
    for _ in range(50):
        fn()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - t0) / calls)
    return statistics.median(runs)


def report(name, value):
    if dist.get_rank() == 0:
        print(f"RESULT {name} {value:.6f}", flush=True)


def row_ops(mesh):
    """Dispatch overhead: tiny DTensors (4x4, sharded rows) through add, mm and sum, no communication."""
    a = distribute_tensor(torch.ones(4 * dist.get_world_size(), 4), mesh, [Shard(0)])
    w = distribute_tensor(torch.ones(4, 4), mesh, [Replicate()])
    report("add_us", per_call(lambda: a + a) * 1e6)
    report("mm_us", per_call(lambda: a @ w) * 1e6)
    report("sum_us", per_call(lambda: a.sum(dim=1)) * 1e6)
    plain = torch.ones(4, 4)
    report("plain_add_us", per_call(lambda: plain + plain) * 1e6)


def row_redistribute(mesh):
    """S(0) -> S(1) of 16 MiB of float32 next to all_to_all_single of the same bytes."""
    n = dist.get_world_size()
    rows = 2048
    cols = (16 << 20) // 4 // rows
    x = distribute_tensor(torch.ones(rows, cols), mesh, [Shard(0)])
    report("s0_s1_ms", timed(lambda: x.redistribute(mesh, [Shard(1)]), 10) * 1e3)
    local = torch.ones(rows // n * cols)
    out = torch.empty(rows // n * cols)
    report("all_to_all_ms", timed(lambda: dist.all_to_all_single(out, local), 10) * 1e3)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.head_dim = dim // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.w1, self.w3 = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(dim, 4 * dim, bias=False)
        self.w2 = nn.Linear(4 * dim, dim, bias=False)
        self.n1, self.n2 = nn.RMSNorm(dim), nn.RMSNorm(dim)

    def forward(self, x):
        bs, seq, _ = x.shape
        h = self.n1(x)
        q, k, v = (w(h).view(bs, seq, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(bs, seq, -1)
        h = x + self.wo(a)
        y = self.n2(h)
        return h + self.w2(F.silu(self.w1(y)) * self.w3(y))


def row_tp(mesh):
    """One training step (forward, backward, AdamW) of a transformer block, dim 512, batch 8 x 128 tokens."""
    torch.manual_seed(0)
    model = Block(512, 8)
    plan = {"wq": ColwiseParallel(), "wk": ColwiseParallel(), "wv": ColwiseParallel(), "wo": RowwiseParallel(),
            "w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()}
    model = parallelize_module(model, mesh, plan)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, 128, 512)

    def step():
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    report("tp_step_ms", timed(step, 10) * 1e3)


def main():
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    {"ops": row_ops, "redistribute": row_redistribute, "tp": row_tp}[ROW](mesh)
    dist.barrier()
    if LIB == "torch":  # PyTorch 2.6's gloo group can hang in shutdown after all_to_all on 4 ranks: leave now
        sys.stdout.flush()
        import os
        os._exit(0)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
