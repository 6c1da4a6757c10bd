"""DTensor's wider op surface (distributed/tensor/_ops_coverage.py), on 2 ranks through the launcher: each op on a
DTensor sharded on dim 0, on dim 1 and replicated equals the op on the whole tensor (values, and gradients for
the differentiable ones); the function forms (torch.abs(dt)), the Python-built activations (F.elu, F.softplus),
the ops that gather a dim (var, topk, chunk, triu, attention) and the composites (F.normalize, F.mse_loss)."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402


def _ops():
    """name -> op over one [4, 6] tensor (DTensor or whole); each result is compared with the whole tensor's.
    (Built after trainrun.distributed.tensor is imported, as a script's functions run after its imports.)"""
    return {
        "torch.abs": torch.abs, "torch.erf": torch.erf, "torch.rsqrt": lambda a: torch.rsqrt(a.abs() + 1),
        "torch.maximum, number-like first": lambda a: torch.maximum(a * 0, a),
        "torch.lerp": lambda a: torch.lerp(a, a * 2, 0.5),
        "torch.addcmul": lambda a: torch.addcmul(a, a, a, value=0.5), "torch.nan_to_num": torch.nan_to_num,
        "torch.hypot": lambda a: torch.hypot(a, a), "sign": lambda a: a.sign(),
        "F.elu": F.elu, "F.leaky_relu": lambda a: F.leaky_relu(a, 0.2), "F.softplus": F.softplus, "F.mish": F.mish,
        "F.hardtanh": F.hardtanh, "F.relu6": F.relu6, "F.sigmoid": F.sigmoid, "F.hardswish": F.hardswish,
        "var(1)": lambda a: a.var(1), "std(0, keepdim)": lambda a: a.std(0, keepdim=True),
        "var(correction=0)": lambda a: a.var(dim=1, correction=0), "logsumexp(1)": lambda a: a.logsumexp(1),
        "cumsum(0)": lambda a: a.cumsum(0), "topk(0).values": lambda a: a.topk(2, dim=0).values,
        "sort(1, descending)": lambda a: a.sort(1, descending=True).values, "tril(-1)": lambda a: a.tril(-1),
        "chunk(2, 0)[1]": lambda a: a.chunk(2, 0)[1], "split([2, 4], 1)[1]": lambda a: a.split([2, 4], 1)[1],
        "unbind(1)[2]": lambda a: a.unbind(1)[2], "masked_fill": lambda a: a.masked_fill(a > 0, 0.0),
        "type_as": lambda a: a.type_as(a.double()), "view_as": lambda a: a.view_as(a),
        "clamp_min": lambda a: a.clamp_min(0.1),
        "F.normalize(dim=0)": lambda a: F.normalize(a, dim=0),
        "F.mse_loss(sum)": lambda a: F.mse_loss(a, a * 0.5, reduction="sum"),
        "F.glu(dim=0)": lambda a: F.glu(a, 0),
        "F.scaled_dot_product_attention": lambda a: F.scaled_dot_product_attention(
            a.view(2, 2, 6).transpose(1, 2), a.view(2, 2, 6).transpose(1, 2), a.view(2, 2, 6).transpose(1, 2)),
        "nn.ReLU()": torch.nn.ReLU(), "nn.GELU('tanh')": torch.nn.GELU("tanh"), "nn.Softplus(2)": torch.nn.Softplus(2),
        "torch.addmm": lambda a: torch.addmm(a[:, :4], a, a.t()[:, :4], beta=0.5, alpha=2),
        "torch.baddbmm": lambda a: torch.baddbmm(a.view(2, 2, 6)[:, :, :2], a.view(2, 2, 6), a.view(2, 6, 2)),
        "torch.einsum": lambda a: torch.einsum("ij,kj->ik", a, a),
        "expand": lambda a: a.unsqueeze(0).expand(3, -1, -1) * 1,
    }


# Those whose gradients are compared too.
DIFFERENTIABLE = ["torch.abs", "F.elu", "F.softplus", "var(1)", "std(0, keepdim)", "logsumexp(1)", "cumsum(0)",
                  "chunk(2, 0)[1]", "split([2, 4], 1)[1]", "tril(-1)", "F.normalize(dim=0)", "F.glu(dim=0)",
                  "masked_fill", "torch.addmm", "torch.einsum", "expand"]


def ops_match_the_whole_tensor():
    from trainrun import distributed as dist
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (2,))  # (it starts the default group, as PyTorch's)
    assert dist.is_initialized() and dist.get_backend() == "gloo"
    OPS = _ops()
    torch.manual_seed(0)
    whole = torch.randn(4, 6)
    failures = []
    for placements in ([Shard(0)], [Shard(1)], [Replicate()]):
        for name, op in OPS.items():
            x = distribute_tensor(whole, mesh, placements)
            out, expected = op(x), op(whole)
            if not isinstance(out, DTensor):
                failures.append(f"{placements} {name}: gave a {type(out).__name__}")
            elif not torch.allclose(out.full_tensor().double(), expected.double(), atol=1e-5):
                failures.append(f"{placements} {name}: wrong values")
        for name in DIFFERENTIABLE:
            x = distribute_tensor(whole, mesh, placements).requires_grad_()
            w = whole.clone().requires_grad_()
            OPS[name](x).sum().backward()
            OPS[name](w).sum().backward()
            if not torch.allclose(x.grad.full_tensor(), w.grad, atol=1e-5):
                failures.append(f"{placements} {name}: wrong gradient")
    assert not failures, failures
    x = distribute_tensor(whole, mesh, [Shard(0)])
    replicated = x.new_zeros(3)
    assert isinstance(replicated, DTensor) and replicated.placements == (Replicate(),) and replicated.shape == (3,)
    with pytest.raises(TypeError, match="mixes a DTensor with a Tensor"):
        torch.maximum(x, whole)
    # allclose/equal answer for the whole tensors, alike on every rank (here rank 1's piece differs).
    y = distribute_tensor(whole, mesh, [Replicate()])
    assert torch.equal(x, y) and torch.allclose(x, y)
    z = DTensor.from_local(x.to_local() + (dist.get_rank() == 1), mesh, [Shard(0)])
    assert not torch.equal(x, z) and not torch.allclose(x, z)
    assert torch.is_tensor(x)
    with pytest.raises(RuntimeError, match="dim 0 is sharded, so its size \\(4\\) cannot change to 8"):
        x.expand(8, 6)
    dist.destroy_process_group()


def test_dtensor_ops_on_two_ranks(ranks):
    ranks.run_function(2, ops_match_the_whole_tensor)
