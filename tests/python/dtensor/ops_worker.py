"""A rank of test_dtensor.py: every op with a sharding rule, forward and
backward, on DTensors of several placements against the same op on the
whole tensors in one process; the random factories, independent of the
sharding; and an op without a rule refusing by name."""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun.distributed.tensor import (DTensor, Partial, Replicate, Shard, distribute_tensor,  # noqa: E402
                                         init_device_mesh)
import trainrun.distributed.tensor as dtensor  # noqa: E402
from trainrun.distributed.tensor.debug import CommDebugMode  # noqa: E402

RNG = np.random.default_rng(0)  # the same draws on every rank
A = RNG.standard_normal((6, 4)).astype(np.float32)
B = RNG.standard_normal((6, 4)).astype(np.float32)
W = RNG.standard_normal((4, 5)).astype(np.float32)
BIAS = RNG.standard_normal((4,)).astype(np.float32)
X3 = RNG.standard_normal((3, 5, 4)).astype(np.float32)

# name -> (inputs as arrays, function of the inputs (same code for DTensors and tensors), placement options)
CASES = {
    "add": ([A, B], lambda a, b: a + b, [[Shard(0)], [Shard(0)]]),
    "add mixed": ([A, B], lambda a, b: a + b, [[Shard(0)], [Shard(1)]]),
    "sub scalar": ([A], lambda a: 2.0 - a * 3.0, [[Shard(1)]]),
    "mul": ([A, B], lambda a, b: a * b, [[Shard(1)], [Replicate()]]),
    "div": ([A, B], lambda a, b: a / (b * b + 1.0), [[Shard(0)], [Shard(0)]]),
    "bias broadcast": ([A, BIAS], lambda a, b: a + b, [[Shard(0)], [Replicate()]]),
    "bias sharded": ([A, BIAS], lambda a, b: a * b, [[Shard(1)], [Shard(0)]]),
    "relu gelu silu": ([A], lambda a: F.gelu(a).relu() + F.silu(a) + a.tanh() * a.sigmoid(), [[Shard(0)]]),
    "exp log sqrt": ([A], lambda a: (a * a + 1.0).log().sqrt() + (a * 0.1).exp(), [[Shard(1)]]),
    "matmul row": ([A, W], lambda a, w: a @ w, [[Shard(0)], [Replicate()]]),
    "matmul col": ([A, W], lambda a, w: a @ w, [[Replicate()], [Shard(1)]]),
    "matmul contract": ([A, W], lambda a, w: tr.matmul(a, w), [[Shard(1)], [Shard(0)]]),
    "matmul mixed": ([A, W], lambda a, w: a.mm(w), [[Shard(0)], [Shard(0)]]),
    "linear": ([A, W, W[0].copy()], lambda a, w, b: F.linear(a, w.t(), b), [[Shard(0)], [Shard(1)],
                                                                                [Replicate()]]),
    "batched 3d": ([X3, W], lambda x, w: x @ w, [[Shard(1)], [Replicate()]]),
    "sum dim sharded": ([A], lambda a: a.sum(dim=0), [[Shard(0)]]),
    "sum dim kept": ([A], lambda a: a.sum(dim=1, keepdim=True), [[Shard(0)]]),
    "sum all": ([A], lambda a: a.sum(), [[Shard(1)]]),
    "mean uneven": ([A], lambda a: a.mean(dim=0), [[Shard(0)]]),
    "mean all": ([A], lambda a: tr.mean(a), [[Shard(0)]]),
    "amax sharded": ([A], lambda a: a.amax(dim=1), [[Shard(1)]]),
    "softmax sharded dim": ([A], lambda a: a.softmax(1), [[Shard(1)]]),
    "log_softmax other dim": ([A], lambda a: F.log_softmax(a, dim=1), [[Shard(0)]]),
    "transpose": ([A], lambda a: a.t() * 2.0, [[Shard(0)]]),
    "permute 3d": ([X3], lambda x: x.permute(2, 0, 1) + 1.0, [[Shard(1)]]),
    "reshape keeps shard": ([X3], lambda x: x.reshape(3, 5, 2, 2) * 1.0, [[Shard(1)]]),
    "view merge after shard": ([X3], lambda x: x.view(3, 20), [[Shard(0)]]),
    "layer_norm rows sharded": ([A, W[0, :4].copy(), W[1, :4].copy()], lambda a, w, b: F.layer_norm(a, (4,), w, b),
                                [[Shard(0)], [Replicate()], [Replicate()]]),
    "layer_norm needs whole rows": ([A], lambda a: F.layer_norm(a, [4]), [[Shard(1)]]),
    "rms_norm": ([X3, W[0, :4].copy()], lambda x, w: F.rms_norm(x, [4], w, eps=1e-6), [[Shard(1)], [Replicate()]]),
    "dropout eval": ([A], lambda a: F.dropout(a, 0.5, training=False) * 2.0, [[Shard(0)]]),
    "partial chain": ([A, W], lambda a, w: (a @ w) * 2.0 + (a @ w), [[Shard(1)], [Shard(0)]]),
}


def run_case(mesh, name, arrays, fn, placements):
    """Forward and backward on DTensors and on whole tensors; returns a failure message or None."""
    full_in = [tr.tensor(a, requires_grad=True) for a in arrays]
    ref = fn(*full_in)
    weight = tr.tensor(RNG.standard_normal(tuple(ref.shape)).astype(np.float32)) if ref.ndim else tr.tensor(1.5)
    (ref * weight).sum().backward()
    # Each mesh dim gets the case's placement on mesh dim 0 and Replicate on the others, and the reverse.
    for layout in range(mesh.ndim):
        ds = []
        for a, p in zip(arrays, placements):
            pl = [Replicate()] * mesh.ndim
            pl[layout] = p[0]
            ds.append(distribute_tensor(tr.tensor(a, requires_grad=True), mesh, pl))
        out = fn(*ds)
        got = out.full_tensor()
        if not np.allclose(got.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5):
            return f"{name} (layout {layout}): forward differs"
        (got * weight).sum().backward()
        for k, (d, f) in enumerate(zip(ds, full_in)):
            g = d.grad.full_tensor().numpy()
            if not np.allclose(g, f.grad.numpy(), rtol=1e-4, atol=1e-5):
                return f"{name} (layout {layout}): gradient of input {k} differs"
    return None


def main():
    import datetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    shape = tuple(int(s) for s in sys.argv[1].split("x"))
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=("a", "b")[:len(shape)])
    rank, failures = dist.get_rank(), []
    for name, (arrays, fn, placements) in CASES.items():
        if "-v" in sys.argv:
            print(f"rank {rank}: {name}", flush=True)
        try:
            message = run_case(mesh, name, arrays, fn, placements)
        except Exception as e:  # a rule that raises is a failure of this case, named
            message = f"{name}: {type(e).__name__}: {e}"
            if "-v" in sys.argv:
                import traceback
                traceback.print_exc()
        if message:
            failures.append(message)
    # Embedding: indices sharded on the batch, or the table sharded on the embedding dim; then cross-entropy of
    # batch-sharded logits against the whole target (a Partial sum of the rows' losses).
    table = RNG.standard_normal((9, 4)).astype(np.float32)
    idx = np.array([[1, 3, 8], [0, 2, 2]])
    ref_w = tr.tensor(table, requires_grad=True)
    ref = F.embedding(tr.tensor(idx), ref_w)
    (ref * ref).sum().backward()
    for idx_pl, w_pl in (([Shard(0)], [Replicate()]), ([Replicate()], [Shard(1)])):
        pad = [Replicate()] * (mesh.ndim - 1)
        di = distribute_tensor(tr.tensor(idx), mesh, idx_pl + pad)
        dw = distribute_tensor(tr.tensor(table, requires_grad=True), mesh, w_pl + pad)
        out = F.embedding(di, dw)
        full = out.full_tensor()
        (full * full).sum().backward()
        if not np.allclose(full.detach().numpy(), ref.detach().numpy(), atol=1e-6) or \
                not np.allclose(dw.grad.full_tensor().numpy(), ref_w.grad.numpy(), atol=1e-5):
            failures.append(f"embedding with indices {idx_pl} and table {w_pl}")
    target = tr.tensor(np.array([0, 3, 1, 2, 3, 0]))
    ref_x = tr.tensor(A, requires_grad=True)
    ref_loss = F.cross_entropy(ref_x, target)
    ref_loss.backward()
    dx = distribute_tensor(tr.tensor(A, requires_grad=True), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    loss = F.cross_entropy(dx, target)
    loss.backward()
    if abs(loss.item() - ref_loss.item()) > 1e-5 or \
            not np.allclose(dx.grad.full_tensor().numpy(), ref_x.grad.numpy(), atol=1e-6):
        failures.append(f"cross_entropy of batch-sharded logits: {loss.item()} vs {ref_loss.item()}")
    # Random factories: the whole tensor does not depend on the sharding.
    tr.manual_seed(7)
    expected = tr.randn(7, 5)
    for placements in ([Shard(0)] * mesh.ndim, [Shard(1)] + [Replicate()] * (mesh.ndim - 1)):
        tr.manual_seed(7)
        got = dtensor.randn(7, 5, device_mesh=mesh, placements=placements).full_tensor()
        if not np.array_equal(got.numpy(), expected.numpy()):
            failures.append(f"randn with {placements} differs from one process's")
    z = dtensor.zeros((5, 3), device_mesh=mesh, placements=[Shard(0)] * mesh.ndim)
    if list(z.shape) != [5, 3] or z.full_tensor().abs().sum().item() != 0:
        failures.append("zeros factory")
    # R -> S is local; S -> R one all_gather; matmul contracting the shard gives Partial with no communication.
    x = distribute_tensor(tr.tensor(A), mesh, [Shard(1)] + [Replicate()] * (mesh.ndim - 1))
    w = distribute_tensor(tr.tensor(W), mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    with CommDebugMode() as comm:
        y = x @ w
    if comm.get_total_counts() != 0 or not y.placements[0].is_partial():
        failures.append(f"contracting matmul: {comm.get_comm_counts()}, {y.placements}")
    # An op without a rule of its own runs on the whole tensor (by replication), never on the local piece alone.
    flipped = tr.flip(x, [0])
    if flipped.placements != tuple(Replicate() for _ in range(mesh.ndim)) or \
            not np.allclose(flipped.full_tensor().numpy(), A[::-1]):
        failures.append(f"flip on a DTensor: {flipped.placements}")
    # A reshape merging the sharded dim unevenly gathers that mesh dim first, as PyTorch's.
    merged = x.reshape(24)
    if merged.placements[0] != Replicate() or not np.allclose(merged.full_tensor().numpy(), A.reshape(24)):
        failures.append(f"a reshape merging the sharded dim: {merged.placements}")
    # from_local with uneven shards needs the shape; Partial sums.
    local = tr.ones(2, 3) * (dist.get_rank() + 1)
    p = DTensor.from_local(local, mesh, [Partial()] * mesh.ndim)
    if p.full_tensor()[0, 0].item() != sum(r + 1 for r in range(dist.get_world_size())):
        failures.append("Partial full_tensor")
    if failures:
        print(f"rank {rank}: failures:\n  " + "\n  ".join(failures), flush=True)
        sys.exit(1)
    print(f"rank {rank}: dtensor ops ok ({len(CASES)} cases)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
