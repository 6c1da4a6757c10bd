"""torch.autograd.Function as PyTorch scripts write it: ctx.save_for_backward/needs_input_grad, the PyTorch 2.0
style (forward without ctx, setup_context), apply with keywords, mark_dirty (the input written in place takes the
history), mark_non_differentiable, once_differentiable and the torch.autograd.function module; the errors of a
spent or stale graph are RuntimeErrors, as PyTorch's; torch.atan2/ldexp and Tensor.view(dtype)."""
import math

import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun.autograd.function import Function, FunctionCtx, once_differentiable  # noqa: E402


class Scale(Function):
    @staticmethod
    def forward(x, k=2.0):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]
        ctx.seen_needs = ctx.needs_input_grad

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


def test_forward_without_ctx_and_setup_context_with_keywords():
    x = torch.ones(3, requires_grad=True)
    y = Scale.apply(x, k=3.0)
    y.sum().backward()
    assert x.grad.tolist() == [3.0] * 3 and y.grad_fn is not None
    x.grad = None
    Scale.apply(x).sum().backward()  # (k's default)
    assert x.grad.tolist() == [2.0] * 3
    assert issubclass(Scale, torch.autograd.Function) and FunctionCtx is torch.autograd.FunctionCtx


class DoubleInPlace(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.mark_dirty(a)
        return a.mul_(2)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        assert not torch.is_grad_enabled()
        return g * 2


def test_mark_dirty_gives_the_input_the_history():
    leaf = torch.ones(2, requires_grad=True)
    a = leaf * 1.5
    out = DoubleInPlace.apply(a)
    assert out is a and a.grad_fn is not None and a.tolist() == [3.0, 3.0]
    (a * a).sum().backward()  # d/dleaf of (2 * 1.5 * leaf)^2 = 2 * 9 * leaf
    assert leaf.grad.tolist() == [18.0, 18.0]
    with pytest.raises(ValueError, match="leaf Variable that requires grad is being used in an in-place"):
        DoubleInPlace.apply(torch.ones(2, requires_grad=True))


class SortWithIndices(Function):
    @staticmethod
    def forward(ctx, x):
        values, indices = x.sort()
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.needs = ctx.needs_input_grad
        return values, indices

    @staticmethod
    def backward(ctx, g_values, g_indices):
        indices, = ctx.saved_tensors
        return torch.zeros_like(g_values).scatter(0, indices, g_values)


def test_mark_non_differentiable_outputs_do_not_require_grad():
    x = torch.tensor([3.0, 1.0, 2.0], requires_grad=True)
    values, indices = SortWithIndices.apply(x)
    assert values.requires_grad and not indices.requires_grad
    (values * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [3.0, 1.0, 2.0]


def test_a_spent_or_stale_graph_raises_runtime_error():
    x = torch.ones(2, requires_grad=True)
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    z = x * 1
    w = z.exp()
    z.add_(1)  # (exp saved its output; z's change does not touch it, but a saved input would)
    v = x.clone()
    u = v.sin()
    v.mul_(2)
    with pytest.raises(RuntimeError, match="modified in place"):
        u.sum().backward()
    assert w.requires_grad


def test_atan2_ldexp_and_view_dtype_are_pytorchs():
    y, x = torch.tensor([1.0, -1.0, 0.0, -0.5]), torch.tensor([-1.0, -1.0, -2.0, 0.0])
    expected = [math.atan2(a, b) for a, b in zip(y.tolist(), x.tolist())]
    assert np.allclose(torch.atan2(y, x).tolist(), expected, atol=1e-6)
    assert np.allclose(torch.arctan2(y, x).tolist(), expected, atol=1e-6)
    assert torch.allclose(y.atan2(x), torch.atan2(y, x))
    assert torch.ldexp(torch.tensor([1.0, 3.0]), torch.tensor([2, 3])).tolist() == [4.0, 24.0]
    f = torch.tensor([1.0, -2.0])
    bits = f.view(torch.int32)
    assert bits.dtype == torch.int32 and bits.tolist() == np.array([1.0, -2.0], np.float32).view(np.int32).tolist()
    assert f.view(torch.uint8).shape == (8,) and torch.equal(bits.view(torch.float32), f)
    assert f.view(dtype=torch.float32) is not f and f.view(torch.float32).tolist() == f.tolist()
    with pytest.raises(RuntimeError, match="requires grad cannot be viewed as another dtype"):
        torch.ones(2, requires_grad=True).view(torch.int32)


def test_in_place_forms_under_autograd_give_pytorchs_gradients():
    """An in-place form computes out of place and writes back: the op's saved input must be the value before the
    write (it once was the written tensor: a silently wrong gradient, or now the version error)."""
    w = torch.tensor([2.0, 3.0], requires_grad=True)
    leaf = torch.tensor([0.5, -1.0], requires_grad=True)
    x = leaf * 1
    x.mul_(w)  # d/dw = x before the write
    x.sin_()
    x.sum().backward()
    before = torch.tensor([0.5, -1.0])
    assert torch.allclose(w.grad, (before * torch.tensor([2.0, 3.0])).cos() * before)
    assert torch.allclose(leaf.grad, (before * torch.tensor([2.0, 3.0])).cos() * torch.tensor([2.0, 3.0]))
    z = torch.tensor([-2.0, 0.5, 3.0], requires_grad=True)
    y = z * 1
    torch.nn.functional.hardtanh(y, inplace=True)  # (clamp's backward reads its input)
    y.sum().backward()
    assert z.grad.tolist() == [0.0, 1.0, 0.0]
    u = torch.ones(2)
    u.mul_(w)  # (u needs no grad, w does: u is still saved for w's gradient)
    u.sum().backward()
    assert torch.allclose(w.grad, (before * torch.tensor([2.0, 3.0])).cos() * before + 1)


def test_writing_into_part_of_a_tensor_under_autograd_is_pytorchs_copy_slices():
    from built_tree import torch as peer
    if peer is None:
        pytest.skip("PyTorch (python3-torch) is not installed")
    results = []
    for t in (torch, peer):
        x = t.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
        w = t.tensor([1.0, 2.0, 3.0], requires_grad=True)
        v = x * 1
        v[:, 1] = w[:2]  # (a slice written with a tensor that requires grad)
        v[1] = v[1] * 2  # (a view of v read, then v written: the read keeps nothing of v)
        v[v > 7] = 0.0  # (a mask)
        v[0, t.tensor([0, 2])] = w[1:] ** 2  # (advanced indexing)
        (v * v).sum().backward()
        results.append((x.grad.numpy().copy(), w.grad.numpy().copy(), v.detach().numpy().copy()))
    for ours, theirs in zip(*results):
        assert np.allclose(ours, theirs)
    leaf = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad is being used in an in-place"):
        leaf[0] = 2.0


def test_writing_into_a_view_under_autograd_reaches_the_base():
    leaf = torch.ones(2, 3, requires_grad=True)
    base = leaf * 1
    row = base[0]
    value = torch.tensor(5.0, requires_grad=True)
    row[1] = value  # (PyTorch's CopySlices: the base's history is rebased)
    (base * torch.arange(6.0).reshape(2, 3)).sum().backward()
    assert base[0, 1].item() == 5.0 and value.grad.item() == 1.0
    assert leaf.grad.tolist() == [[0.0, 0.0, 2.0], [3.0, 4.0, 5.0]]
