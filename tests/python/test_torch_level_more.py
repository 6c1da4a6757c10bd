"""More of torch's top level and Tensor methods (trainrun/_torch_level_more.py): the *_copy ops equal their views
but share no memory; sym_* helpers; the ATen-level losses with an int reduction; bitwise shifts, igamma,
nonzero_static, triangular_solve, histogramdd, threshold, constant_pad_nd, put and their Tensor methods;
cauchy_/log_normal_/geometric_ sample their distributions. Compared with PyTorch 1.13 where it has the op."""
import math

import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def ref_torch():
    return pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")


def same(ours, theirs, atol=1e-6):
    a, b = np.asarray(ours.detach().tolist()), theirs.detach().numpy()
    assert a.shape == b.shape and np.allclose(a, b, atol=atol), (a, b)


COPY_CASES = [("view_copy", ([6, 4],)), ("select_copy", (1, 2)), ("slice_copy", (1, 1, 4, 2)),
              ("transpose_copy", (0, 2)), ("permute_copy", ([2, 0, 1],)), ("diagonal_copy", (0, 1, 2)),
              ("unsqueeze_copy", (1,)), ("squeeze_copy", ()), ("t_copy", None), ("expand_copy", ([2, 2, 3, 4],)),
              ("unfold_copy", (2, 2, 1)), ("detach_copy", ()), ("alias_copy", ())]


@pytest.mark.parametrize("name,args", COPY_CASES)
def test_copy_ops_equal_their_views_and_own_their_memory(name, args):
    x = torch.arange(24.0).reshape(2, 3, 4)
    if args is None:
        x, args = torch.arange(6.0).reshape(2, 3), ()
    out = getattr(torch, name)(x, *args)
    before = out.clone()
    x.add_(100)  # the copy does not see the input change
    assert torch.equal(out, before)
    ref = ref_torch()
    rx = ref.arange(24.0).reshape(2, 3, 4) if x.ndim == 3 else ref.arange(6.0).reshape(2, 3)
    if hasattr(ref, name):
        same(out, getattr(ref, name)(rx, *args))


def test_copy_ops_with_several_results():
    x = torch.arange(10.0).reshape(5, 2)
    parts = torch.split_copy(x, 2)
    assert [p.shape for p in parts] == [(2, 2), (2, 2), (1, 2)]
    assert [p.tolist() for p in torch.unbind_copy(x, 1)] == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    assert [p.shape[0] for p in torch.split_with_sizes_copy(x, [1, 4])] == [1, 4]
    out = torch.empty(10)
    assert torch.view_copy(x, [10], out=out) is out and out.tolist() == list(range(10))


def test_sym_helpers():
    assert torch.sym_int(3.7) == 3 and torch.sym_int(-3.7) == -3 and torch.sym_float(2) == 2.0
    assert torch.sym_max(2, 5) == 5 and torch.sym_min(2, 5) == 2 and torch.sym_not(False) is True
    assert torch.sym_ite(True, "a", "b") == "a" and torch.sym_sqrt(9) == 3.0 and torch.sym_sum([1, 2, 3]) == 6
    torch.sym_constrain_range(4, min=2, max=8)
    with pytest.raises(RuntimeError, match="Invalid value 9"):
        torch.sym_constrain_range_for_size(9, max=8)


def test_aten_level_losses_take_int_reductions():
    ref = ref_torch()
    torch.manual_seed(0)
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0])
    ra, rb, ry = (ref.tensor(t.tolist()) for t in (a, b, y))
    same(torch.kl_div(a.log_softmax(1), b.softmax(1), 2), ref.kl_div(ra.log_softmax(1), rb.softmax(1), 2))
    same(torch.kl_div(a, b, 0, log_target=True), ref.kl_div(ra, rb, 0, log_target=True))
    same(torch.binary_cross_entropy_with_logits(a, b.sigmoid()),
         ref.binary_cross_entropy_with_logits(ra, rb.sigmoid()))
    same(torch.margin_ranking_loss(a[:, 0], b[:, 0], y, 0.1, 1), ref.margin_ranking_loss(ra[:, 0], rb[:, 0], ry, 0.1, 1))
    same(torch.cosine_embedding_loss(a, b, y, 0.2, 2), ref.cosine_embedding_loss(ra, rb, ry, 0.2, 2))
    same(torch.hinge_embedding_loss(a[:, 0], y), ref.hinge_embedding_loss(ra[:, 0], ry))
    same(torch.triplet_margin_loss(a, b, a.flip(0)), ref.triplet_margin_loss(ra, rb, ra.flip(0)))
    same(torch.poisson_nll_loss(a, b.abs(), True, False, 1e-8, 1), ref.poisson_nll_loss(ra, rb.abs(), True, False,
                                                                                        1e-8, 1))
    assert torch.kl_div(a, b, "sum").shape == () and torch.kl_div(a, b).shape == (4, 3)  # (torch.*: no reduction)
    assert torch.margin_ranking_loss(a[:, 0], b[:, 0], y).shape == (4,)
    with pytest.raises(ValueError, match="reduction must be 0"):
        torch.kl_div(a, b, 5)


def test_shifts_igamma_and_their_methods():
    ref = ref_torch()
    x = torch.tensor([1, -5, 3, 1024])
    assert torch.bitwise_left_shift(x, 2).tolist() == ref.bitwise_left_shift(ref.tensor([1, -5, 3, 1024]), 2).tolist()
    assert x.bitwise_right_shift(1).tolist() == [0, -3, 1, 512]
    y = x.clone()
    assert y.bitwise_left_shift_(1) is y and y.tolist() == [2, -10, 6, 2048]
    a, z = torch.tensor([0.5, 2.0, 7.0], dtype=torch.float64), torch.tensor([0.3, 2.5, 4.0], dtype=torch.float64)
    ra, rz = ref.tensor(a.tolist(), dtype=ref.float64), ref.tensor(z.tolist(), dtype=ref.float64)
    same(torch.igamma(a, z), ref.igamma(ra, rz), atol=1e-12)
    same(a.igammac(z), ref.igammac(ra, rz), atol=1e-12)
    w = a.clone()
    assert w.igamma_(z) is w and torch.allclose(w + torch.igammac(a, z), torch.ones(3, dtype=torch.float64))


def test_nonzero_static_pads_or_cuts():
    x = torch.tensor([[0, 1], [2, 0], [3, 4]])
    assert torch.nonzero_static(x, size=5).tolist() == [[0, 1], [1, 0], [2, 0], [2, 1], [-1, -1]]
    assert x.nonzero_static(size=2, fill_value=7).tolist() == [[0, 1], [1, 0]]
    assert torch.nonzero_static(torch.zeros(3), size=2, fill_value=9).tolist() == [[9], [9]]
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.nonzero_static(x, size=-1)


def test_triangular_solve_histogramdd_and_small_ops():
    ref = ref_torch()
    torch.manual_seed(1)
    A = torch.randn(3, 3).triu() + 3 * torch.eye(3)
    b = torch.randn(3, 2)
    rA, rb = ref.tensor(A.tolist()), ref.tensor(b.tolist())
    for upper, transpose, unit in ((True, False, False), (True, True, False), (True, False, True)):
        sol, coeff = torch.triangular_solve(b, A, upper, transpose, unit)
        rsol, _ = ref.triangular_solve(rb, rA, upper, transpose, unit)
        same(sol, rsol, atol=1e-5)
        assert torch.equal(coeff, A)
    assert b.triangular_solve(A).solution.shape == (3, 2)
    pts = torch.tensor([[0.1, 0.2], [0.5, 0.9], [0.7, 0.3], [0.9, 0.95]])
    hist, edges = torch.histogramdd(pts, bins=[2, 3], range=[0.0, 1.0, 0.0, 1.0])
    rhist, redges = ref.histogramdd(ref.tensor(pts.tolist()), bins=[2, 3], range=[0.0, 1.0, 0.0, 1.0])
    same(hist, rhist)
    assert len(edges) == 2 and all(np.allclose(e.tolist(), r.tolist()) for e, r in zip(edges, redges))
    x = torch.tensor([-1.0, 0.5, 2.0])
    assert torch.threshold(x, 0.6, -9.0).tolist() == [-9.0, -9.0, 2.0]
    assert torch.constant_pad_nd(x, [1, 2], 7.0).tolist() == [7.0, -1.0, 0.5, 2.0, 7.0, 7.0]
    assert torch.put(torch.zeros(2, 2), torch.tensor([3, 0]), torch.tensor([5.0, 6.0])).tolist() == [[6, 0], [0, 5]]


def test_random_fills_sample_their_distributions():
    torch.manual_seed(0)
    n = 200000
    c = torch.empty(n).cauchy_(1.0, 2.0)
    assert abs(c.median().item() - 1.0) < 0.05
    assert abs(((c - 1.0).abs() < 2.0).double().mean().item() - 0.5) < 0.01  # (half the mass within one scale)
    ln = torch.empty(n, dtype=torch.float64).log_normal_(0.5, 0.25)
    assert abs(ln.log().mean().item() - 0.5) < 0.005 and abs(ln.log().std().item() - 0.25) < 0.005
    g = torch.empty(n).geometric_(0.25)
    assert g.min().item() == 1.0 and abs(g.mean().item() - 4.0) < 0.05  # (mean 1/p)
    assert torch.equal(torch.ones(4).geometric_(1.0), torch.ones(4))
    with pytest.raises(RuntimeError, match=r"p to be in \(0, 1\]"):
        torch.empty(2).geometric_(0.0)
    torch.manual_seed(3)
    first = torch.empty(5).cauchy_()
    torch.manual_seed(3)
    assert torch.equal(first, torch.empty(5).cauchy_())


def test_tensor_queries_and_build_flags():
    x = torch.zeros(2, 3, 4)
    assert x.dim_order() == (0, 1, 2) and x.permute(2, 0, 1).dim_order() == (1, 2, 0)
    assert x.names == (None, None, None) and not x.has_names() and not x.is_distributed()
    assert x.is_xla is False and not torch.is_distributed(x)
    assert torch.has_lapack and torch.has_spectral and not torch.has_mkl
    assert torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(False)
    assert not torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(True)
    assert math.isfinite(torch.tensor(1.0).item())


def test_map2_and_deprecated_resize():
    x = torch.tensor([1.0, 2.0, 3.0])
    assert x.map2_(torch.tensor([10.0, 20.0, 30.0]), torch.tensor(100.0), lambda a, b, c: a + b + c) is x
    assert x.tolist() == [111.0, 122.0, 133.0]
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        assert torch.arange(6.0).resize(2, 3).shape == (2, 3)
    with pytest.warns(UserWarning):
        assert torch.arange(6.0).resize_as(torch.zeros(3, 2)).tolist() == [[0, 1], [2, 3], [4, 5]]
    ref = ref_torch()
    r = ref.tensor([1.0, 2.0, 3.0])
    r.map2_(ref.tensor([10.0, 20.0, 30.0]), ref.tensor(100.0), lambda a, b, c: a + b + c)
    assert r.tolist() == [111.0, 122.0, 133.0]


def test_named_tuple_results_carry_pytorchs_names():
    ref = ref_torch()
    x = torch.randn(4, 4)
    a = x @ x.T + 4 * torch.eye(4)
    ra = ref.tensor(a.tolist())
    pairs = [(torch.nanmedian(x, 1), ref.nanmedian(ref.tensor(x.tolist()), 1)),
             (torch.linalg.lstsq(a, x), ref.linalg.lstsq(ra, ref.tensor(x.tolist()))),
             (torch.linalg.cholesky_ex(a), ref.linalg.cholesky_ex(ra)), (torch.linalg.inv_ex(a), ref.linalg.inv_ex(ra)),
             (torch.linalg.solve_ex(a, x), ref.linalg.solve_ex(ra, ref.tensor(x.tolist())))]
    for ours, theirs in pairs:
        assert type(ours).__name__ == type(theirs).__name__
        assert all(hasattr(theirs, field) for field in ours._fields) and len(ours) == len(theirs)


def test_geqrf_householder_product_and_ormqr_match_pytorch():
    ref = ref_torch()
    A = np.random.RandomState(0).randn(2, 5, 3)
    a, tau = torch.geqrf(torch.tensor(A))
    ra, rtau = ref.geqrf(ref.tensor(A))
    assert np.allclose(np.array(a.tolist()), ra.numpy(), atol=1e-12) and np.allclose(np.array(tau.tolist()),
                                                                                   rtau.numpy(), atol=1e-12)
    q = torch.linalg.householder_product(a, tau)
    assert np.allclose(np.array(q.tolist()), ref.linalg.householder_product(ra, rtau).numpy(), atol=1e-12)
    assert torch.allclose(q @ a.triu()[..., :3, :], torch.tensor(A), atol=1e-12)  # (Q R = A)
    assert torch.equal(torch.orgqr(a, tau), q) and torch.equal(a.orgqr(tau), q)
    rng = np.random.RandomState(1)
    for left, transpose, shape in ((True, False, (2, 5, 4)), (True, True, (2, 5, 4)), (False, False, (2, 4, 5)),
                                   (False, True, (2, 4, 5))):
        c = rng.randn(*shape)
        got = torch.ormqr(a, tau, torch.tensor(c), left, transpose)
        assert np.allclose(np.array(got.tolist()), ref.ormqr(ra, rtau, ref.tensor(c), left, transpose).numpy(),
                           atol=1e-12)
    # householder_product is differentiable (a product of core ops), as PyTorch's
    a0 = a[0].detach().clone().requires_grad_()
    torch.linalg.householder_product(a0, tau[0]).pow(2).sum().backward()
    ra0 = ra[0].detach().clone().requires_grad_()
    ref.linalg.householder_product(ra0, rtau[0]).pow(2).sum().backward()
    assert np.allclose(np.array(a0.grad.tolist()), ra0.grad.numpy(), atol=1e-10)
    with pytest.raises(RuntimeError, match="must be greater than or equal"):
        torch.linalg.householder_product(torch.ones(2, 3), torch.ones(1))


def test_median_propagates_nan_and_picks_pytorchs_index_among_ties():
    ref = ref_torch()
    nan = float("nan")
    rows = [[1.0, nan, 2.0, nan, 0.5], [3.0, 1.0, 1.0, 2.0, 1.0], [2.0, 2.0, 2.0, 2.0, 2.0], [nan] * 5]
    for keepdim in (False, True):
        for dim in (1, -1):
            ours, theirs = torch.median(torch.tensor(rows), dim, keepdim), ref.median(ref.tensor(rows), dim, keepdim)
            assert ours.indices.tolist() == theirs.indices.tolist(), (ours, theirs)
            assert np.allclose(np.asarray(ours.values.tolist()), theirs.values.numpy(), equal_nan=True), (ours, theirs)
    assert math.isnan(torch.tensor(rows[0]).median().item()) and torch.tensor(rows[1]).median().item() == 1.0
    assert math.isnan(torch.tensor([]).median().item())
    # The gradient goes to the element picked, the NaN included.
    x = torch.tensor([[1.0, nan, 2.0], [3.0, 1.0, 2.0]], requires_grad=True)
    rx = ref.tensor(x.tolist(), requires_grad=True)
    x.median(1).values.nansum().backward()
    rx.median(1).values.nansum().backward()
    assert x.grad.tolist() == rx.grad.tolist()


@pytest.mark.parametrize("name", ["tril", "triu"])
def test_triangles_match_pytorch_for_every_diagonal_shape_and_in_place(name):
    ref = ref_torch()
    rng = np.random.RandomState(3)
    for shape in [(4, 6), (6, 4), (2, 3, 5, 5), (0, 3), (3, 0), (1, 1)]:
        a = rng.randn(*shape).astype(np.float32)
        for diagonal in (-7, -2, -1, 0, 1, 3, 9):
            want = getattr(ref, name)(ref.tensor(a), diagonal).numpy()
            inplace = torch.tensor(a)
            getattr(inplace, name + "_")(diagonal)
            for ours in (getattr(torch, name)(torch.tensor(a), diagonal),
                         getattr(torch.tensor(a), name)(diagonal=diagonal), inplace):
                assert ours.numpy().shape == want.shape and np.array_equal(ours.numpy(), want), (shape, diagonal)
    ints = torch.arange(12).reshape(3, 4)
    assert getattr(ints, name)(-1).tolist() == getattr(ref.arange(12).reshape(3, 4), name)(-1).tolist()


def test_median_and_kthvalue_select_as_pytorch_over_ties_and_nans_and_topk_takes_sorted():
    ref = ref_torch()
    rng = np.random.RandomState(0)
    for trial in range(60):
        a = rng.randint(0, 4, size=(rng.randint(1, 5), rng.randint(1, 12))).astype(np.float32)
        if trial % 3 == 0:
            a[rng.rand(*a.shape) < 0.2] = np.nan
        for dim in (0, 1):
            ours, theirs = torch.tensor(a).median(dim), ref.tensor(a).median(dim)
            assert ours.indices.tolist() == theirs.indices.tolist(), (a, dim)  # PyTorch's: ties by index
            k = rng.randint(1, a.shape[dim] + 1)
            ours, theirs = torch.tensor(a).kthvalue(k, dim), ref.tensor(a).kthvalue(k, dim)
            assert np.allclose(ours.values.numpy(), theirs.values.numpy(), equal_nan=True), (a, dim, k)
            picked = torch.tensor(a).gather(dim, ours.indices.unsqueeze(dim)).squeeze(dim)
            assert np.allclose(picked.numpy(), ours.values.numpy(), equal_nan=True)
    x = torch.tensor([3.0, 1.0, 2.0, 5.0, 1.0])
    top = torch.topk(x, 3, largest=False, sorted=False)
    assert sorted(top.values.tolist()) == [1.0, 1.0, 2.0] and sorted(top.indices.tolist()) == [1, 2, 4]
    assert torch.topk(x, 3, sorted=True).values.tolist() == [5.0, 3.0, 2.0]
