"""Every Tensor method works on a DTensor (distributed/tensor/_ops_fallback.py), on 2 ranks through the launcher:
aliases, more elementwise methods and in-place forms keep the layout; the rest run by replication and equal
the method on the whole tensor (values, named-tuple results and gradients); in-place methods write each rank's
piece back; shape-changing in-place methods change the layout; autograd's hooks see DTensors; methods that
make no sense on a split tensor say so."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def _methods():
    """name -> op over one [4, 6] tensor, compared with the whole tensor's."""
    return {
        "multiply": lambda a: a.multiply(a), "swapaxes": lambda a: a.swapaxes(0, 1),
        "arccos": lambda a: a.tanh().arccos(),
        "greater": lambda a: a.greater(0), "bool": lambda a: a.bool(), "long": lambda a: (a * 10).long(),
        "lgamma": lambda a: (a.abs() + 1).lgamma(), "logaddexp": lambda a: a.logaddexp(a * 2),
        "fmax": lambda a: a.fmax(a * -1), "flip": lambda a: a.flip(1), "roll": lambda a: a.roll(1, 0),
        "gather": lambda a: a.gather(1, torch.tensor([[0, 5]] * 4)), "narrow": lambda a: a.narrow(1, 1, 3),
        "index_select": lambda a: a.index_select(1, torch.tensor([4, 0])), "squeeze": lambda a: a[:1].squeeze(),
        "repeat": lambda a: a.repeat(2, 1), "tile": lambda a: a.tile((1, 2)), "diagonal": lambda a: a.diagonal(),
        "all": lambda a: (a > -10).all(), "any(1)": lambda a: (a > 1).any(1), "where": lambda a: a.where(a > 0, a * 3),
        "median(1).values": lambda a: a.median(1).values, "kthvalue(2, 0).indices": lambda a: a.kthvalue(2, 0).indices,
        "cummax(1).values": lambda a: a.cummax(1).values, "outer": lambda a: a[0].outer(a[1]),
        "dot": lambda a: a[0].dot(a[1]), "masked_select": lambda a: a.masked_select(a > 0),
        "unflatten": lambda a: a.unflatten(1, (2, 3)), "ravel": lambda a: a.ravel(), "mT": lambda a: a.mT,
        "isclose": lambda a: a.isclose(a + 1e-9), "diff": lambda a: a.diff(dim=1),
        "renorm": lambda a: a.renorm(2, 0, 1.0),
    }


DIFFERENTIABLE = ["multiply", "lgamma", "flip", "gather", "narrow", "median(1).values", "outer", "renorm", "mT",
                  "tile"]


def methods_match_the_whole_tensor():
    from trainrun import distributed as dist
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (2,))
    methods = _methods()
    torch.manual_seed(0)
    whole = torch.randn(4, 6)
    failures = []
    for placements in ([Shard(0)], [Shard(1)], [Replicate()]):
        for name, op in methods.items():
            out, expected = op(distribute_tensor(whole, mesh, placements)), op(whole)
            if not isinstance(out, DTensor):
                failures.append(f"{placements} {name}: gave a {type(out).__name__}")
            elif out.dtype != expected.dtype or not torch.allclose(out.full_tensor().double(), expected.double(),
                                                                   atol=1e-5):
                failures.append(f"{placements} {name}: wrong values")
        for name in DIFFERENTIABLE:
            x = distribute_tensor(whole, mesh, placements).requires_grad_()
            w = whole.clone().requires_grad_()
            methods[name](x).pow(2).sum().backward()
            methods[name](w).pow(2).sum().backward()
            if not torch.allclose(x.grad.full_tensor(), w.grad, atol=1e-5):
                failures.append(f"{placements} {name}: wrong gradient")
        # In place: elementwise on the pieces, or by replication with each piece written back.
        x = distribute_tensor(whole, mesh, placements)
        x.lgamma_().fill_diagonal_(7.0).index_fill_(1, torch.tensor([2]), -1.0)
        expected = whole.clone().lgamma_().fill_diagonal_(7.0).index_fill_(1, torch.tensor([2]), -1.0)
        if x.placements != tuple(placements) or not torch.allclose(x.full_tensor(), expected, atol=1e-5):
            failures.append(f"{placements} in place: wrong values or layout")
    assert not failures, failures
    # The function forms: torch.flip(dt, ...) is dt.flip(...).
    index = torch.zeros(4, 1, dtype=torch.int64)
    functions = {"flip": lambda a: torch.flip(a, [0]), "gather": lambda a: torch.gather(a, 1, index),
                 "roll": lambda a: torch.roll(a, 1, 0), "diagonal": torch.diagonal, "all": lambda a: torch.all(a > -9),
                 "masked_select": lambda a: torch.masked_select(a, a > 0), "median": torch.median,
                 "narrow": lambda a: torch.narrow(a, 1, 0, 2), "isclose": lambda a: torch.isclose(a, a),
                 "logaddexp": lambda a: torch.logaddexp(a, a), "outer": lambda a: torch.outer(a[0], a[1])}
    for name, op in functions.items():
        out = op(distribute_tensor(whole, mesh, [Shard(0)]))
        if not isinstance(out, DTensor) or not torch.allclose(out.full_tensor().double(), op(whole).double()):
            failures.append(f"torch.{name}: wrong")
    assert not failures, failures
    # Shape-changing in place: the DTensor's layout follows.
    x = distribute_tensor(whole, mesh, [Shard(0)])
    x.t_()
    assert x.shape == (6, 4) and x.placements == (Shard(1),) and torch.equal(x.full_tensor(), whole.t())
    x.unsqueeze_(0)
    assert x.shape == (1, 6, 4) and x.placements == (Shard(2),)
    # Describing the piece, and autograd's handles.
    x = distribute_tensor(whole, mesh, [Shard(1)]).requires_grad_()
    assert x.is_contiguous() == x.to_local().is_contiguous() and x.data_ptr() == x.to_local().data_ptr()
    assert x.is_signed() and x.get_device() == -1 and x.cpu().placements == (Shard(1),)
    seen = []
    y = x * 2
    assert y.grad_fn is not None and x.grad_fn is None
    y.register_hook(lambda g: seen.append(g) or g * 3)
    y.retain_grad()
    assert y.retains_grad
    y.sum().backward()
    assert isinstance(seen[0], DTensor) and seen[0].placements == (Shard(1),)
    assert torch.equal(x.grad.full_tensor(), torch.full([4, 6], 6.0))
    with pytest.raises(NotImplementedError, match="DTensor.as_strided: a DTensor is split over ranks"):
        x.as_strided((2, 2), (1, 1))
    assert dist.get_world_size() == 2
    dist.destroy_process_group()


def test_every_tensor_method_works_on_a_dtensor(ranks):
    ranks.run_function(2, methods_match_the_whole_tensor)


def test_no_tensor_method_is_missing_from_dtensor():
    from trainrun.distributed.tensor import DTensor
    missing = [n for n in dir(torch.Tensor) if not n.startswith("_") and not hasattr(DTensor, n)]
    assert not missing, missing
