"""GELU's backward is one op (gelu_backward, as PyTorch's aten::gelu_backward): on the CPU one vectorized pass for
float32 with the forward's erf, the formula's ops otherwise (other dtypes, strides, the tanh form, and a double
backward, which differentiates them). Its gradients are PyTorch's within float32 tolerance."""
import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(37,), (64, 512), (3, 5, 7)])
def test_gradients_are_pytorchs(approximate, shape):
    peer = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)  # (past the erf's tails: |x| up to ~12)
    g = rng.standard_normal(shape).astype(np.float32)
    ours = torch.tensor(x, requires_grad=True)
    torch.nn.functional.gelu(ours, approximate=approximate).backward(torch.tensor(g))
    theirs = peer.tensor(x, requires_grad=True)
    peer.nn.functional.gelu(theirs, approximate=approximate).backward(peer.tensor(g))
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=2e-6)


def test_strided_and_float64_inputs_take_the_formula_with_the_same_result():
    base = torch.randn(6, 4, dtype=torch.float64)
    for x in (base, base.t(), base.float().t()):
        leaf = x.detach().requires_grad_()
        torch.nn.functional.gelu(leaf).sum().backward()
        dense = x.detach().contiguous().requires_grad_()
        torch.nn.functional.gelu(dense).sum().backward()
        assert leaf.grad.dtype == x.dtype
        torch.testing.assert_close(leaf.grad, dense.grad)


def test_double_backward_differentiates_the_formula():
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    for approximate in ("none", "tanh"):
        assert torch.autograd.gradgradcheck(lambda t: torch.nn.functional.gelu(t, approximate=approximate), (x,))
