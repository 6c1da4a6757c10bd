"""Max pooling with ceil_mode and dilation (1-, 2- and 3-D, with and without indices) and average pooling with
ceil_mode equal to PyTorch 1.13's: values, indices and the input's gradient."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun  # noqa: E402

X1 = np.sin(np.arange(2 * 3 * 7, dtype=np.float32)).reshape(2, 3, 7)
X2 = np.sin(np.arange(2 * 2 * 7 * 6, dtype=np.float32) * 0.7).reshape(2, 2, 7, 6)
X3 = np.sin(np.arange(1 * 2 * 5 * 5 * 4, dtype=np.float32) * 1.3).reshape(1, 2, 5, 5, 4)

# name -> (input, pool of (functional module, input))
CASES = {
    "max1d ceil": (X1, lambda F, x: F.max_pool1d(x, 2, ceil_mode=True)),
    "max1d ceil stride 3 padding 1": (X1, lambda F, x: F.max_pool1d(x, 3, 3, 1, ceil_mode=True)),
    "max1d dilation 2": (X1, lambda F, x: F.max_pool1d(x, 2, 1, dilation=2)),
    "max2d ceil": (X2, lambda F, x: F.max_pool2d(x, 2, ceil_mode=True)),
    "max2d ceil 3x3 stride 2 padding 1": (X2, lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True)),
    "max2d dilation": (X2, lambda F, x: F.max_pool2d(x, 2, stride=1, dilation=(2, 3))),
    "max2d dilation ceil": (X2, lambda F, x: F.max_pool2d(x, 2, stride=2, dilation=2, ceil_mode=True)),
    "max2d unbatched ceil": (X2[0], lambda F, x: F.max_pool2d(x, (2, 4), (3, 4), ceil_mode=True)),
    "max3d ceil": (X3, lambda F, x: F.max_pool3d(x, 2, ceil_mode=True)),
    "max3d ceil padding dilation": (X3, lambda F, x: F.max_pool3d(x, 2, 2, 1, dilation=(1, 2, 1), ceil_mode=True)),
    "avg2d ceil": (X2, lambda F, x: F.avg_pool2d(x, 2, ceil_mode=True)),
    "avg2d ceil exclude pad": (X2, lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)),
    "avg1d ceil": (X1, lambda F, x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True)),
}


def _run(torch, case, with_indices):
    array, fn = case
    x = torch.tensor(array.copy()).requires_grad_()
    functional = torch.nn.functional
    if with_indices:
        out, indices = fn(_WithIndices(functional), x)
    else:
        out, indices = fn(functional, x), None
    (out * torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape).sin()).sum().backward()
    return out.detach().numpy(), None if indices is None else indices.numpy(), x.grad.numpy()


class _WithIndices:
    """The functional module with return_indices=True passed to its max pools."""

    def __init__(self, functional):
        self.functional = functional

    def __getattr__(self, name):
        return lambda *args, **kwargs: getattr(self.functional, name)(*args, return_indices=True, **kwargs)


@needs_torch
@pytest.mark.parametrize("name", list(CASES))
def test_pool_equals_pytorch(name):
    ours, _, our_grad = _run(trainrun, CASES[name], False)
    theirs, _, their_grad = _run(peer, CASES[name], False)
    assert ours.shape == theirs.shape and np.allclose(ours, theirs, atol=1e-6), (ours, theirs)
    assert np.allclose(our_grad, their_grad, atol=1e-5), (our_grad, their_grad)


@needs_torch
@pytest.mark.parametrize("name", [n for n in CASES if n.startswith("max")])
def test_max_pool_indices_equal_pytorch(name):
    ours, our_indices, our_grad = _run(trainrun, CASES[name], True)
    theirs, their_indices, their_grad = _run(peer, CASES[name], True)
    assert ours.shape == theirs.shape and np.allclose(ours, theirs, atol=1e-6)
    assert np.array_equal(our_indices, their_indices), (our_indices, their_indices)
    assert np.allclose(our_grad, their_grad, atol=1e-5)


@needs_torch
def test_modules_take_ceil_mode():
    x = X2[:1]
    for make in (lambda nn: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
                 lambda nn: nn.MaxPool1d(2, ceil_mode=True), lambda nn: nn.AvgPool2d(2, ceil_mode=True)):
        source = x[:, 0] if isinstance(make(peer.nn), peer.nn.MaxPool1d) else x
        ours = make(trainrun.nn)(trainrun.tensor(source)).numpy()
        theirs = make(peer.nn)(peer.tensor(source)).numpy()
        assert ours.shape == theirs.shape and np.allclose(ours, theirs)
