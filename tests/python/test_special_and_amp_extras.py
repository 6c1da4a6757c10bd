"""torch.special's i0/i0e/i1/i1e, erfcx, ndtri, erfinv and torch.kaiser_window against PyTorch 1.13 across their
ranges (series, expansion and continued-fraction regions, and the seams between them), with i0's gradient; and
torch.amp.custom_fwd/custom_bwd: cast_inputs runs forward in float32 under autocast, backward follows forward's
autocast state."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402


@needs_torch
@pytest.mark.parametrize("name", ["i0", "i0e", "i1", "i1e"])
def test_bessel_functions_match(name):
    x = np.array([-40.0, -30.5, -30.0, -5.0, -0.5, 0.0, 1e-3, 0.3, 2.0, 15.0, 29.9, 30.1, 50.0, 700.0])
    ours = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float64)).numpy()
    theirs = getattr(peer.special, name)(peer.tensor(x)).numpy()
    assert np.allclose(ours, theirs, rtol=1e-12, atol=0)
    f32 = getattr(torch.special, name)(torch.tensor(x[:-1], dtype=torch.float32))
    assert f32.dtype == torch.float32


@needs_torch
def test_error_function_relatives_match():
    y = np.array([-26.0, -3.0, -1.0, 0.0, 0.5, 1.99, 2.0, 2.5, 5.0, 9.9, 10.1, 50.0, 1e4, 1e10])
    ours = torch.special.erfcx(torch.tensor(y, dtype=torch.float64)).numpy()
    assert np.allclose(ours, peer.special.erfcx(peer.tensor(y)).numpy(), rtol=1e-13, atol=0)
    p = np.array([1e-6, 0.01, 0.3, 0.5, 0.9, 0.999])
    assert np.allclose(torch.special.ndtri(torch.tensor(p, dtype=torch.float64)).numpy(),
                       peer.special.ndtri(peer.tensor(p)).numpy(), atol=1e-10)
    assert np.allclose(torch.special.erfinv(torch.tensor(p)).numpy(), peer.special.erfinv(peer.tensor(p)).numpy(),
                       atol=1e-6)
    for args in ((16,), (9, False, 5.0), (1,), (0,)):
        assert np.allclose(torch.kaiser_window(*args).numpy(), peer.kaiser_window(*args).numpy(), atol=1e-6)


@needs_torch
def test_i0_gradient_is_i1():
    x = torch.tensor([0.5, -3.0, 35.0], dtype=torch.float64, requires_grad=True)
    torch.i0(x).sum().backward()
    assert np.allclose(x.grad.numpy(), peer.special.i1(peer.tensor([0.5, -3.0, 35.0], dtype=peer.float64)).numpy(),
                       rtol=1e-10)
    assert torch.tensor([1.0]).i0().item() == pytest.approx(1.2660658777520084)


class CastToFloat(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ctx.backward_autocast = torch.is_autocast_enabled("cpu")
        return grad @ b.t(), a.t() @ grad


class FollowAutocast(CastToFloat):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b


def test_custom_fwd_and_bwd():
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cast, followed = CastToFloat.apply(a, b), FollowAutocast.apply(a, b)
    assert cast.dtype == torch.float32 and followed.dtype == torch.bfloat16
    assert torch.allclose(cast, a @ b, atol=1e-6)
    cast.sum().backward()
    assert a.grad.dtype == torch.float32 and torch.allclose(a.grad, torch.ones(3, 2) @ b.t(), atol=1e-6)
    with pytest.raises(ValueError, match="device_type"):
        torch.amp.custom_fwd(device_type=None)
    assert torch.cuda.amp.custom_fwd is not None and torch.cuda.amp.custom_bwd is not None
