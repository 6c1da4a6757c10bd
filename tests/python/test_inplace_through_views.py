"""In-place writes through views under autograd, as PyTorch's autograd does them (CopySlices): `y[:, 1] += 5`,
`y.view(-1)[0] = 7`, `y.narrow(...).mul_(w)`, `y.t().add_(1)`, `y.diagonal().mul_(w)`, fill_/zero_/copy_ and an
op's in-place form (sigmoid_) on a view, a write into a base whose view is used afterwards, chains of views.
Each case's values and gradients (to the input and to the written values) equal PyTorch 1.13's. A write over an
output saved for backward fails at backward, as PyTorch's does."""
import pytest

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun  # noqa: E402


def _cases(torch):
    return {
        "slice +=": lambda x, w: _ret(x * 2, lambda y: y[:, 1].__iadd__(5)),
        "setitem through view(-1)": lambda x, w: _ret(x * 2, lambda y: y.view(-1).__setitem__(0, 7.0)),
        "narrow mul_": lambda x, w: _ret(x * 2, lambda y: y.narrow(1, 0, 1).mul_(3)),
        "transposed add_": lambda x, w: (x * 2).t().add_(1),
        "row mul_ by a tensor that requires grad": lambda x, w: _ret(x * 2, lambda y: y[1].mul_(w)),
        "view used after its base is written": lambda x, w: _view_after_base_write(x),
        "setitem of a tensor": lambda x, w: _ret(x * 2, lambda y: y.__setitem__(0, w)),
        "copy_ into a column": lambda x, w: _ret(x * 2, lambda y: y[:, 0].copy_(w.sum() * torch.ones(3))),
        "fill_ through t()[1]": lambda x, w: _ret(x * 2, lambda y: y.t()[1].fill_(0.0)),
        "view += then used": lambda x, w: _view_add_then_used(x, w),
        "zero_ on a row": lambda x, w: _ret(x + 1, lambda y: y[0].zero_()),
        "diagonal mul_": lambda x, w: _ret(x * 2, lambda y: y.diagonal().mul_(w)),
        "setitem through unsqueeze": lambda x, w: _ret(x * 2, lambda y: y.unsqueeze(0).__setitem__(
            (0, slice(1, None), slice(None)), 0.0)),
        "sigmoid_ on rows": lambda x, w: _ret(x * 1, lambda y: y[1:].sigmoid_()),
        "slice of a flat view set from w": lambda x, w: _flat_slice(x, w),
    }


def _ret(y, write):
    write(y)
    return y


def _view_after_base_write(x):
    y = x * 2
    v = y[1]
    y.mul_(3)
    return v * 1


def _view_add_then_used(x, w):
    y = x * 2
    v = y[:, 1]
    v += w[0]
    return y * v.sum()


def _flat_slice(x, w):
    y = x * 2
    z = y.view(-1)
    z[2:4] = w
    return y + z.sum()


def _run(torch, name):
    x = torch.arange(6.0).reshape(3, 2).requires_grad_()
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    y = _cases(torch)[name](x, w)
    (y * torch.arange(1.0, 1.0 + y.numel()).reshape(tuple(y.shape))).sum().backward()
    return y.detach().reshape(-1).tolist(), x.grad.tolist(), None if w.grad is None else w.grad.tolist()


@needs_torch
@pytest.mark.parametrize("name", list(_cases(trainrun)))
def test_values_and_gradients_equal_pytorch(name):
    ours, theirs = _run(trainrun, name), _run(peer, name)
    assert _close(ours, theirs), (ours, theirs)


def _close(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-5 * max(1.0, abs(b))


def test_views_know_their_base():
    x = trainrun.ones(3, 2, requires_grad=True)
    y = x * 2
    v = y.t()[1]
    assert v._is_view() and v._base._cdata == y._cdata and not y._is_view() and y._base is None


def test_writing_over_an_output_saved_for_backward_fails_at_backward():
    x = trainrun.ones(3, 2, requires_grad=True)
    y = trainrun.relu(x * 2)
    y.add_(1)  # (relu saved y for its backward)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0].mul_(2)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        (x * 1)[0].unsqueeze(0).expand(4, 2).mul_(2)
