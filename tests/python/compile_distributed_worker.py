"""A rank of tests/python/test_compile.py's distributed case, started by trainrun, each model trained with SGD
and compared with one process training on the concatenated batches:
 - a compiled module inside DDP: its recorded backward feeds DDP's gradient hooks;
 - DDP inside trainrun.compile: DDP's forward is the module's (a buffer broadcast, a collective, would be a
   graph break), and its hooks sit on the parameters, which the recorded backward reaches;
 - compiled blocks inside fully_shard: FSDP gathers new parameter tensors each step, which the recording
   takes as inputs, so every step after the first replays."""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
from trainrun import nn  # noqa: E402
from trainrun.distributed.fsdp import fully_shard  # noqa: E402


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x):
        return x + self.mlp(x)


def blocks():
    tr.manual_seed(0)
    return nn.Sequential(Block(), Block(), nn.Linear(8, 3))


def net():
    tr.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


def batch(rank, step):
    rng = np.random.default_rng(10 * rank + step)
    return tr.tensor(rng.normal(size=(6, 5)).astype(np.float32)), tr.tensor(rng.integers(0, 3, size=6))


def train(model, params, rank, world, steps=3):
    opt = tr.optim.SGD(params, lr=0.1)
    for step in range(steps):
        opt.zero_grad()
        if world == 0:  # the reference: every rank's batch in one process
            xs, ys = zip(*(batch(r, step) for r in range(2)))
            nn.functional.cross_entropy(model(tr.cat(list(xs))), tr.cat(list(ys))).backward()
        else:
            x, y = batch(rank, step)
            out = model(x)
            nn.functional.cross_entropy(out, y).backward()
        opt.step()


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    reference = net()
    train(reference, reference.parameters(), rank, 0)

    inner = net()
    compiled = tr.compile(inner)
    ddp = nn.parallel.DistributedDataParallel(compiled, bucket_cap_mb=0.0005)
    train(ddp, inner.parameters(), rank, world)
    for (name, p), q in zip(inner.named_parameters(), reference.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg="DDP(compile(module)) " + name)
    assert compiled._compiled.replays == 2, compiled.explain()
    assert "backward recorded" in compiled.explain(), compiled.explain()

    outer_net = net()
    outer = tr.compile(nn.parallel.DistributedDataParallel(outer_net, bucket_cap_mb=0.0005))
    train(outer, outer_net.parameters(), rank, world)
    for (name, p), q in zip(outer_net.named_parameters(), reference.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg="compile(DDP(module)) " + name)
    assert outer._compiled.replays == 2, outer.explain()

    reference, sharded = blocks(), blocks()
    for block in (sharded[0], sharded[1]):
        block.mlp = tr.compile(block.mlp)
        fully_shard(block)
    fully_shard(sharded)
    opt, ref_opt = tr.optim.SGD(sharded.parameters(), lr=0.1), tr.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(4):
        rng = np.random.default_rng(step)
        x = tr.tensor(rng.normal(size=(8, 8)).astype(np.float32))
        y = tr.tensor(rng.integers(0, 3, size=8))
        opt.zero_grad()
        nn.functional.cross_entropy(sharded(x[4 * rank:4 * rank + 4]), y[4 * rank:4 * rank + 4]).backward()
        opt.step()
        ref_opt.zero_grad()
        nn.functional.cross_entropy(reference(x), y).backward()
        ref_opt.step()
    state = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in sharded.state_dict().items()}
    for k, v in reference.state_dict().items():
        np.testing.assert_allclose(state[k.replace("mlp.", "mlp._orig_mod.")].detach().numpy(), v.numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg="fully_shard(compiled blocks) " + k)
    assert sharded[0].mlp._compiled.replays == 3, sharded[0].mlp.explain()
    print(f"rank {rank}: compiled under DDP and FSDP ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
