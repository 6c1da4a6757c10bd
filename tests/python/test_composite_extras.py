"""isin, kron, block_diag, cartesian_prod, rot90, nansum, nanmean, logcumsumexp, trapezoid, quantile and
nanquantile (every interpolation, q as a number or a tensor, dim or all, keepdim, NaNs) against PyTorch 1.13, with
gradients where they are differentiable; their errors name the function."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402


def _ours(t):
    return torch.tensor(t.tolist()) if t.dim() else torch.tensor(t.item())


def _same(ours, theirs, tol=1e-5):
    a, b = np.array(ours.tolist(), dtype=float), np.array(theirs.tolist(), dtype=float)
    return a.shape == b.shape and np.allclose(a, b, atol=tol, equal_nan=True)


@needs_torch
def test_values_match_pytorch():
    peer.manual_seed(0)
    x, y = peer.randn(3, 4), peer.randn(2, 3)
    ix, iy = peer.tensor([1, 2, 3, 4]), peer.tensor([2, 4])
    nan = peer.tensor([[1.0, float("nan")], [3.0, 4.0]])
    cases = {
        "isin": (torch.isin(_ours(ix), _ours(iy)), peer.isin(ix, iy)),
        "isin invert": (torch.isin(_ours(ix), 2, invert=True), peer.isin(ix, 2, invert=True)),
        "kron": (torch.kron(_ours(x), _ours(y)), peer.kron(x, y)),
        "kron 1-d by 2-d": (torch.kron(_ours(x[0]), _ours(y)), peer.kron(x[0], y)),
        "block_diag": (torch.block_diag(_ours(x), _ours(y), torch.tensor(7.0)),
                       peer.block_diag(x, y, peer.tensor(7.0))),
        "cartesian_prod": (torch.cartesian_prod(torch.arange(2), torch.arange(3)),
                           peer.cartesian_prod(peer.arange(2), peer.arange(3))),
        "nansum": (torch.nansum(_ours(nan), 1), peer.nansum(nan, 1)),
        "nanmean": (torch.nanmean(_ours(nan)), peer.nanmean(nan)),
        "nanmean dim": (_ours(nan).nanmean(0), nan.nanmean(0)),
        "logcumsumexp": (torch.logcumsumexp(_ours(x * 50), 1), peer.logcumsumexp(x * 50, 1)),
        "trapezoid": (torch.trapezoid(_ours(x)), peer.trapezoid(x)),
        "trapezoid dx": (torch.trapezoid(_ours(x), dx=0.5, dim=0), peer.trapezoid(x, dx=0.5, dim=0)),
        "trapezoid x": (torch.trapezoid(_ours(x), torch.tensor([0.0, 1.0, 3.0, 6.0])),
                        peer.trapezoid(x, peer.tensor([0.0, 1.0, 3.0, 6.0]))),
        "quantile all": (torch.quantile(_ours(x), 0.5), peer.quantile(x, 0.5)),
        "quantile q tensor keepdim": (torch.quantile(_ours(x), torch.tensor([0.1, 0.9]), dim=0, keepdim=True),
                                      peer.quantile(x, peer.tensor([0.1, 0.9]), dim=0, keepdim=True)),
        "quantile method": (_ours(x).quantile(0.25, dim=-1), x.quantile(0.25, dim=-1)),
    }
    for k in range(-2, 5):
        cases[f"rot90 k={k}"] = (torch.rot90(_ours(x), k, [0, 1]), peer.rot90(x, k, [0, 1]))
    for how in ("linear", "lower", "higher", "midpoint", "nearest"):
        cases[f"quantile {how}"] = (torch.quantile(_ours(x), 0.3, dim=1, interpolation=how),
                                    peer.quantile(x, 0.3, dim=1, interpolation=how))
    with_nan = x.clone()
    with_nan[0, 1] = float("nan")
    cases["quantile with a NaN"] = (torch.quantile(_ours(with_nan), 0.5, dim=1), peer.quantile(with_nan, 0.5, dim=1))
    cases["nanquantile"] = (torch.nanquantile(_ours(with_nan), 0.5, dim=1), peer.nanquantile(with_nan, 0.5, dim=1))
    bad = [name for name, (ours, theirs) in cases.items() if not _same(ours, theirs, 1e-3 if "logcumsumexp" in name
                                                                        else 1e-5)]
    assert not bad, bad


def test_gradients_flow_and_errors_name_the_function():
    x = torch.randn(3, 4, requires_grad=True)
    (torch.kron(x, torch.ones(2, 2)).sum() + torch.logcumsumexp(x, 1).sum() + torch.quantile(x, 0.5, dim=1).sum() +
     torch.trapezoid(x).sum() + torch.rot90(x).sum()).backward()
    assert x.grad is not None and bool(x.grad.isfinite().all())
    with pytest.raises(RuntimeError, match="quantile\\(\\) q values must be in the range"):
        torch.quantile(x, 1.5)
    with pytest.raises(ValueError, match="quantile\\(\\) interpolation must be one of"):
        torch.quantile(x, 0.5, interpolation="cubic")
    with pytest.raises(RuntimeError, match="expected rotation dims to be different"):
        torch.rot90(x, 1, [0, 0])
    with pytest.raises(RuntimeError, match="nanmean\\(\\): expected input to have floating point dtype"):
        torch.nanmean(torch.arange(3))


@needs_torch
def test_cummax_and_cummin_match_pytorch():
    for data in ([1.0, 3.0, 3.0, 2.0, 5.0, 5.0], [[3.0, 1.0, 1.0], [2.0, 0.0, 4.0]], [1.0, float("nan"), 2.0]):
        for dim in (0, -1):
            for name in ("cummax", "cummin"):
                got, want = getattr(torch, name)(torch.tensor(data), dim), getattr(peer, name)(peer.tensor(data), dim)
                assert _same(got.values, want.values) and got.indices.tolist() == want.indices.tolist(), (name, data)
    x, y = torch.tensor([1.0, 3.0, 2.0, 4.0], requires_grad=True), peer.tensor([1.0, 3.0, 2.0, 4.0], requires_grad=True)
    x.cummax(0).values.sum().backward()
    y.cummax(0).values.sum().backward()
    assert x.grad.tolist() == y.grad.tolist()
