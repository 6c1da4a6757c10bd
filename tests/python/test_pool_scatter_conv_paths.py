"""The CPU kernels' fast paths against PyTorch 1.13 and against their general paths: max_pool2d's row loop
(windows inside the plane, a whole row at a time) with padding, dilation, ceil_mode, ties and NaNs, values and
indices and the gradient; gather/scatter/scatter_add over dense operands (slices in parallel) against strided
operands (the general walk), with duplicates and a bad index; and conv2d's oneDNN temporaries coming from the
caching allocator (repeated convolutions take no fresh pages)."""
import itertools
import resource

import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as tr  # noqa: E402


def peer():
    return pytest.importorskip("torch", reason="PyTorch is not installed: no oracle")


POOLS = [dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=c)
         for k, s, p, d, c in itertools.product([2, 3], [1, 2], [0, 1], [1, 2], [False, True]) if p <= k // 2]


@pytest.mark.parametrize("options", POOLS, ids=lambda o: "k{kernel_size}s{stride}p{padding}d{dilation}c{ceil_mode:d}"
                         .format(**o))
def test_max_pool2d_values_indices_and_gradient_match_pytorch(options):
    torch = peer()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 11, 13)).astype(np.float32)
    x[0, 0, 2:4, 2:4] = 0.5  # a tie: the first of equal maxima wins
    x[1, 2, 5, 6], x[1, 2, 6, 7] = np.nan, np.nan  # NaNs: the last one in a window wins
    ours_x = tr.tensor(x, requires_grad=True)
    theirs_x = torch.tensor(x, requires_grad=True)
    ours, ours_i = tr.nn.functional.max_pool2d(ours_x, return_indices=True, **options)
    theirs, theirs_i = torch.nn.functional.max_pool2d(theirs_x, return_indices=True, **options)
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
    np.testing.assert_array_equal(ours_i.numpy(), theirs_i.numpy())
    g = rng.standard_normal(tuple(theirs.shape)).astype(np.float32)
    ours.backward(tr.tensor(g))
    theirs.backward(torch.tensor(g))
    np.testing.assert_allclose(ours_x.grad.numpy(), theirs_x.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_max_pool2d_of_integers_and_of_a_window_wider_than_the_plane():
    x = tr.arange(2 * 5 * 5).reshape(2, 5, 5)
    out, idx = tr.nn.functional.max_pool2d(x, 2, return_indices=True)
    assert out.tolist() == [[[6, 8], [16, 18]], [[31, 33], [41, 43]]]
    assert idx[0].tolist() == [[6, 8], [16, 18]]
    assert tr.nn.functional.max_pool2d(tr.ones(1, 1, 2, 2), 3, padding=1).tolist() == [[[[1.0]]]]


def test_dense_gather_and_scatter_equal_the_strided_walk():
    rng = np.random.default_rng(1)
    x = tr.tensor(rng.standard_normal((4, 6, 5)).astype(np.float32))
    for dim in range(3):
        index = tr.tensor(rng.integers(0, x.shape[dim], size=(4, 6, 5)))  # duplicates along dim
        src = tr.tensor(rng.standard_normal((4, 6, 5)).astype(np.float32))
        strided_x = x.transpose(0, 2).contiguous().transpose(0, 2)  # the same values, not contiguous
        strided_src = src.transpose(0, 2).contiguous().transpose(0, 2)
        assert tr.equal(x.gather(dim, index), strided_x.gather(dim, index))
        np.testing.assert_allclose(x.scatter_add(dim, index, src).numpy(),
                                   strided_x.scatter_add(dim, index, strided_src).numpy(), rtol=1e-6)
        expected = np.take_along_axis(x.numpy(), index.numpy(), dim)
        np.testing.assert_array_equal(x.gather(dim, index).numpy(), expected)
    unique = tr.tensor(np.argsort(rng.standard_normal((4, 6, 5)), axis=1))  # a permutation along dim 1
    out = tr.zeros(4, 6, 5).scatter(1, unique, src)
    np.testing.assert_array_equal(out.gather(1, unique).numpy(), src.numpy())


def test_scatter_add_matches_pytorch_and_a_bad_index_names_itself():
    torch = peer()
    rng = np.random.default_rng(2)
    base = rng.standard_normal((3, 8, 64)).astype(np.float32)
    index = rng.integers(0, 8, size=(3, 5, 64))
    src = rng.standard_normal((3, 5, 64)).astype(np.float32)
    ours = tr.tensor(base).scatter_add(1, tr.tensor(index), tr.tensor(src))
    theirs = torch.tensor(base).scatter_add(1, torch.tensor(index), torch.tensor(src))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6)
    index[2, 4, 63] = 8
    with pytest.raises(IndexError, match="scatter_add: index 8 is out of bounds for dim 1 with size 8"):
        tr.tensor(base).scatter_add(1, tr.tensor(index), tr.tensor(src))


def test_repeated_convolutions_take_no_fresh_pages():
    x = tr.randn(8, 64, 56, 56, requires_grad=True)
    w = tr.randn(64, 64, 3, 3, requires_grad=True)
    g = tr.randn(8, 64, 56, 56)
    for _ in range(2):  # (the caches fill)
        tr.nn.functional.conv2d(x, w, padding=1).backward(g)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        tr.nn.functional.conv2d(x, w, padding=1).backward(g)
    per_step = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 3
    # oneDNN's blocked copies of x, w and the output (6 MiB each) from fresh pages were ~9600 faults a step
    assert per_step < 1000, f"{per_step:.0f} page faults per convolution step"


@pytest.mark.parametrize("dims", [(0, 2, 3), (0, 3), (0, 1, 3), (0, 2), [-4, -1]])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sums_and_variances_that_keep_middle_dims_read_in_place_and_match_numpy(dims, dtype):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((6, 5, 7, 9)) + 3).astype(dtype)
    t = tr.tensor(x)
    wanted = x.astype(np.float64).sum(axis=tuple(dims))
    np.testing.assert_allclose(t.sum(dim=dims).numpy(), wanted, rtol=1e-6)
    np.testing.assert_allclose(t.mean(dim=dims, keepdim=True).numpy(),
                               x.astype(np.float64).mean(axis=tuple(dims), keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(t.var(dim=dims).numpy(), x.astype(np.float64).var(axis=tuple(dims), ddof=1), rtol=1e-5)
    np.testing.assert_allclose(t.var(dim=dims, unbiased=False, keepdim=True).numpy(),
                               x.astype(np.float64).var(axis=tuple(dims), keepdims=True), rtol=1e-5)
    assert t.sum(dim=dims).dtype == t.dtype
    with pytest.raises(IndexError):
        t.sum(dim=(0, 4))
