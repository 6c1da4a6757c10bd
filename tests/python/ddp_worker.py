"""A rank of tests/python/test_nn_ddp.py, started by trainrun: DDP from
Python on a Python-defined module. Checks that gradients equal one process
on the concatenated batch, that no_sync accumulates, and (mode "fail") that
@record reports a Python exception to the launcher."""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
from trainrun import nn  # noqa: E402
from trainrun.distributed.elastic import record  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(5, 16)
        self.gain = nn.Parameter(tr.ones([16]))
        self.b = nn.Linear(16, 3)

    def forward(self, x):
        return self.b(tr.tanh(self.a(x)) * self.gain)


class MaskedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(5, 3)

    def forward(self, x, mask, scale=1.0):
        return self.a(x * mask) * scale


def batch(rank, step):
    rng = np.random.default_rng(10 * rank + step)
    return tr.tensor(rng.normal(size=(6, 5)).astype(np.float32)), tr.tensor(rng.integers(0, 3, size=6))


def grads(module):
    return {n: p.grad.numpy().copy() for n, p in module.named_parameters()}


@record
def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if sys.argv[1] == "fail":
        if rank == 1:
            raise ValueError("rank 1 found a NaN in batch 3")
        dist.barrier()
        return
    tr.manual_seed(rank)  # DDP must replace these with rank 0's weights
    net = Net()
    model = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.0005)
    tr.manual_seed(0)
    reference = Net()
    assert all(np.array_equal(p.detach().numpy(), q.detach().numpy()) for (_, p), (_, q) in
               zip(net.named_parameters(), reference.named_parameters())), "rank 0's weights"
    x, y = batch(rank, 0)
    nn.functional.cross_entropy(model(x), y).backward()
    xs, ys = zip(*(batch(r, 0) for r in range(world)))
    nn.functional.cross_entropy(reference(tr.cat(list(xs))), tr.cat(list(ys))).backward()
    for name, g in grads(net).items():
        np.testing.assert_allclose(g, grads(reference)[name], rtol=1e-5, atol=1e-6, err_msg=name)
    # no_sync: the first micro-batch stays local, the second syncs both.
    model.zero_grad()
    reference.zero_grad()
    with model.no_sync():
        x, y = batch(rank, 1)
        nn.functional.cross_entropy(model(x), y).backward()
    x, y = batch(rank, 2)
    nn.functional.cross_entropy(model(x), y).backward()
    for r in range(world):
        for step in (1, 2):
            xr, yr = batch(r, step)
            (nn.functional.cross_entropy(reference(xr), yr) / world).backward()
    for name, g in grads(net).items():
        np.testing.assert_allclose(g, grads(reference)[name], rtol=1e-5, atol=1e-6, err_msg="no_sync " + name)
    # The bf16 compression hook: the same gradients to bf16 precision.
    from trainrun.distributed.algorithms import default_hooks
    tr.manual_seed(5)
    compressed = nn.parallel.DistributedDataParallel(Net())
    compressed.register_comm_hook(None, default_hooks.bf16_compress_hook)
    tr.manual_seed(5)
    exact = nn.parallel.DistributedDataParallel(Net())
    for m in (compressed, exact):
        x, y = batch(rank, 3)
        nn.functional.cross_entropy(m(x), y).backward()
    for (name, p), (_, q) in zip(compressed.module.named_parameters(), exact.module.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=2e-2, atol=2e-3, err_msg="bf16 " + name)
    try:  # one hook per model, as PyTorch's
        compressed.register_comm_hook(None, lambda state, bucket: bucket)
        raise AssertionError("a second hook was accepted")
    except RuntimeError as e:
        assert "can only be called once" in str(e)
    # A forward with several arguments and a keyword (an attention mask, a scale) goes through DDP whole.
    tr.manual_seed(7)
    masked = nn.parallel.DistributedDataParallel(MaskedNet())
    tr.manual_seed(7)
    masked_reference = MaskedNet()
    x, y = batch(rank, 4)
    mask = (tr.arange(5) != rank).float()
    nn.functional.cross_entropy(masked(x, mask, scale=0.5), y).backward()
    for r in range(world):
        xr, yr = batch(r, 4)
        (nn.functional.cross_entropy(masked_reference(xr, (tr.arange(5) != r).float(), scale=0.5), yr) /
         world).backward()
    for (name, p), (_, q) in zip(masked.module.named_parameters(), masked_reference.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg="masked " + name)
    # Tensors only: the call goes through C++ DDP's list forward into the Python module, whose own Python
    # hooks still run (once per call) and may replace the output.
    masked.zero_grad()
    masked_reference.zero_grad()
    seen = []
    handle = masked.module.register_forward_hook(lambda mod, args, out: seen.append(len(args)) or out * 2.0)
    x, y = batch(rank, 5)
    nn.functional.cross_entropy(masked(x, mask), y).backward()
    handle.remove()
    assert seen == [2], seen
    for r in range(world):
        xr, yr = batch(r, 5)
        (nn.functional.cross_entropy(masked_reference(xr, (tr.arange(5) != r).float()) * 2.0, yr) /
         world).backward()
    for (name, p), (_, q) in zip(masked.module.named_parameters(), masked_reference.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg="hooked " + name)
    work = dist.all_reduce(tr.ones([4]), async_op=True)
    work.wait()
    print(f"rank {rank}: ddp ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
