"""linalg.svd, svdvals, qr and slogdet with gradients, against PyTorch 1.13's autograd in float64: values and input
gradients for tall, wide, square and batched inputs, full and reduced SVDs, a loss through U alone, S alone, the
nuclear and spectral norms, QR in every differentiable mode (and PyTorch's refusals for the others), and the
deprecated torch.svd/torch.qr. Also cov's observation weights, diag_embed's offset and dims, and
linalg.solve(left=False)."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun  # noqa: E402

_rng = np.random.default_rng(0)
ARRAYS = {s: _rng.standard_normal(s) for s in [(5, 3), (3, 5), (4, 4), (2, 4, 3)]}

CASES = {
    "svd reduced tall": ((5, 3), lambda t, a: t.linalg.svd(a, full_matrices=False)),
    "svd reduced wide": ((3, 5), lambda t, a: t.linalg.svd(a, full_matrices=False)),
    "svd full tall": ((5, 3), lambda t, a: t.linalg.svd(a, full_matrices=True)),
    "svd batched": ((2, 4, 3), lambda t, a: t.linalg.svd(a, full_matrices=False)),
    "svd S only": ((5, 3), lambda t, a: t.linalg.svd(a, full_matrices=False).S),
    "svd U only": ((3, 5), lambda t, a: t.linalg.svd(a, full_matrices=False).U),
    "svdvals": ((3, 5), lambda t, a: t.linalg.svdvals(a)),
    "nuclear norm": ((4, 4), lambda t, a: t.linalg.matrix_norm(a, ord="nuc")),
    "torch.norm nuc": ((3, 5), lambda t, a: t.norm(a, p="nuc")),
    "Tensor.norm nuc over dims keepdim": ((2, 4, 3), lambda t, a: a.norm(p="nuc", dim=(0, 2), keepdim=True)),
    "spectral norm": ((5, 3), lambda t, a: t.linalg.matrix_norm(a, ord=2)),
    "qr tall": ((5, 3), lambda t, a: t.linalg.qr(a)),
    "qr square": ((4, 4), lambda t, a: t.linalg.qr(a)),
    "qr wide": ((3, 5), lambda t, a: t.linalg.qr(a)),
    "qr batched": ((2, 4, 3), lambda t, a: t.linalg.qr(a)),
    "qr complete wide": ((3, 5), lambda t, a: t.linalg.qr(a, mode="complete")),
    "qr Q only": ((5, 3), lambda t, a: t.linalg.qr(a).Q),
    "slogdet": ((4, 4), lambda t, a: t.linalg.slogdet(a).logabsdet),
    "torch.svd": ((5, 3), lambda t, a: t.svd(a)),
    "torch.qr": ((5, 3), lambda t, a: t.qr(a)),
}


def _values_and_gradient(torch, shape, fn):
    a = torch.tensor(ARRAYS[shape].copy()).requires_grad_()
    outs = fn(torch, a)
    outs = outs if isinstance(outs, tuple) else (outs,)
    loss = 0
    for i, o in enumerate(outs):  # a fixed weighting of every output, so each one's gradient counts
        loss = loss + (o * torch.tensor(np.cos(np.arange(o.numel()).reshape(tuple(o.shape)) + i))).sum()
    loss.backward()
    return [o.detach().numpy() for o in outs], a.grad.numpy()


@needs_torch
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(CASES))
def test_values_and_gradients_equal_pytorch(name):
    shape, fn = CASES[name]
    ours, our_grad = _values_and_gradient(trainrun, shape, fn)
    theirs, their_grad = _values_and_gradient(peer, shape, fn)
    assert len(ours) == len(theirs)
    for x, y in zip(ours, theirs):
        assert x.shape == y.shape and np.allclose(x, y, atol=1e-8), (x, y)
    assert np.allclose(our_grad, their_grad, atol=1e-7), (our_grad, their_grad)


def test_qr_modes_without_a_gradient_say_so():
    a = trainrun.tensor(ARRAYS[(5, 3)].copy()).requires_grad_()
    q, r = trainrun.linalg.qr(a, mode="r")
    assert q.numel() == 0 and r.shape == (3, 3)
    with pytest.raises(RuntimeError, match="not computed when mode='r'"):
        r.sum().backward()
    q, r = trainrun.linalg.qr(a, mode="complete")
    assert q.shape == (5, 5)
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        q.sum().backward()
    with pytest.raises(RuntimeError, match="unrecognized mode 'full'"):
        trainrun.linalg.qr(a, mode="full")


@needs_torch
def test_cov_weights_diag_embed_and_solve_from_the_right_equal_pytorch():
    x = _rng.standard_normal((3, 5))
    fw, aw = np.array([1, 2, 1, 3, 1]), np.array([0.5, 1.0, 1.0, 2.0, 1.0])
    for correction in (0, 1, 2):
        for kwargs in ({"fweights": fw}, {"aweights": aw}, {"fweights": fw, "aweights": aw}):
            ours = trainrun.cov(trainrun.tensor(x), correction=correction,
                                **{k: trainrun.tensor(v) for k, v in kwargs.items()})
            theirs = peer.cov(peer.tensor(x), correction=correction, **{k: peer.tensor(v) for k, v in kwargs.items()})
            assert np.allclose(ours.numpy(), theirs.numpy()), (correction, kwargs)
    with pytest.raises(RuntimeError, match="fweights to have integral dtype"):
        trainrun.cov(trainrun.tensor(x), fweights=trainrun.tensor(aw))
    v = _rng.standard_normal((2, 3))
    for offset, dim1, dim2 in [(0, -2, -1), (1, 0, 2), (-2, 2, 0), (2, 1, 0), (-1, -1, -3)]:
        ours = trainrun.diag_embed(trainrun.tensor(v), offset, dim1, dim2)
        assert np.array_equal(ours.numpy(), peer.diag_embed(peer.tensor(v), offset, dim1, dim2).numpy())
    a, b = _rng.standard_normal((4, 4)), _rng.standard_normal((2, 4))
    ours = trainrun.linalg.solve(trainrun.tensor(a), trainrun.tensor(b), left=False)
    assert np.allclose(ours.numpy(), peer.linalg.solve(peer.tensor(a), peer.tensor(b), left=False).numpy())
