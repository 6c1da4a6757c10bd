"""Complex values as rotary embeddings use them (view_as_complex, polar, a complex product, view_as_real) against
PyTorch 1.13: Llama's apply_rotary_emb with its precompute_freqs_cis, values and input gradients; the
ComplexTensor's arithmetic, conj/abs/angle, shape operations and indexing; a module keeping the table."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402


def _np(t):
    return np.array(t.detach().tolist(), dtype=float)


def _freqs_cis(lib, dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (lib.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = lib.arange(end, device=freqs.device, dtype=lib.float32)
    freqs = lib.outer(t, freqs).float()
    return lib.polar(lib.ones_like(freqs), freqs)  # complex64


def _reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def _apply_rotary_emb(lib, xq, xk, freqs_cis):
    xq_ = lib.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = lib.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = _reshape_for_broadcast(freqs_cis, xq_)
    xq_out = lib.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = lib.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


@needs_torch
def test_llama_rotary_embedding_matches_pytorch():
    peer.manual_seed(0)
    q, k = peer.randn(2, 6, 3, 8), peer.randn(2, 6, 3, 8)
    theirs_q, theirs_k = q.clone().requires_grad_(), k.clone().requires_grad_()
    ours_q, ours_k = torch.tensor(q.tolist(), requires_grad=True), torch.tensor(k.tolist(), requires_grad=True)
    want = _apply_rotary_emb(peer, theirs_q, theirs_k, _freqs_cis(peer, 8, 6))
    got = _apply_rotary_emb(torch, ours_q, ours_k, _freqs_cis(torch, 8, 6))
    for a, b in zip(got, want):
        np.testing.assert_allclose(_np(a), _np(b), atol=1e-5)
    (want[0] * want[1]).sum().backward()
    (got[0] * got[1]).sum().backward()
    np.testing.assert_allclose(_np(ours_q.grad), _np(theirs_q.grad), atol=1e-4)
    np.testing.assert_allclose(_np(ours_k.grad), _np(theirs_k.grad), atol=1e-4)


@needs_torch
def test_complex_operations_match_pytorch():
    re, im = [1.0, -1.0, 0.0, -2.0, 3.0, 0.5], [0.0, 0.0, 0.0, -1e-9, -4.0, 2.0]
    ours, theirs = torch.complex(torch.tensor(re), torch.tensor(im)), peer.complex(peer.tensor(re), peer.tensor(im))
    assert ours.dtype is torch.complex64 and str(theirs.dtype) == "torch.complex64"
    other_o, other_t = torch.complex(torch.tensor(im), torch.tensor(re)), peer.complex(peer.tensor(im), peer.tensor(re))

    def same(a, b, tol=1e-5):
        if hasattr(b, "is_complex") and b.is_complex():
            np.testing.assert_allclose(_np(torch.view_as_real(a)), peer.view_as_real(b).numpy(), atol=tol)
        else:
            np.testing.assert_allclose(_np(a), b.numpy(), atol=tol)
    same(ours * other_o, theirs * other_t)
    same(ours * 2.5, theirs * 2.5)
    same(ours * torch.tensor(re), theirs * peer.tensor(re))
    same(ours + ours.conj(), theirs + theirs.conj())
    same((ours + 1) / (ours.conj() + 2), (theirs + 1) / (theirs.conj() + 2))
    same(ours - 1.5, theirs - 1.5)
    same(ours.abs(), theirs.abs())
    same(ours.angle(), theirs.angle())
    same(ours.real, theirs.real)
    same(ours.imag, theirs.imag)
    grid = torch.complex(torch.arange(12.0).reshape(3, 4), torch.ones(3, 4))
    peer_grid = peer.complex(peer.arange(12.0).reshape(3, 4), peer.ones(3, 4))
    same(grid[1:], peer_grid[1:])
    same(grid[..., 2], peer_grid[..., 2])
    same(grid.unsqueeze(0).transpose(1, 2), peer_grid.unsqueeze(0).transpose(1, 2))
    same(grid.flatten(), peer_grid.flatten())
    assert tuple(grid.view(4, 3).shape) == (4, 3) and grid.numel() == 12 and grid.ndim == 2
    assert grid[1, 2].item() == complex(6.0, 1.0) and torch.view_as_real(grid).shape == (3, 4, 2)
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        torch.view_as_complex(torch.ones(3, 3))


def test_a_module_keeps_a_complex_table():
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = torch.nn.Linear(8, 8)
            self.register_buffer("freqs_cis", _freqs_cis(torch, 8, 6), persistent=False)

    module = Attention()
    assert isinstance(module.freqs_cis, torch.ComplexTensor) and list(module.state_dict()) == ["wq.weight", "wq.bias"]
    assert tuple(module.freqs_cis[:4].shape) == (4, 4) and module.freqs_cis.to("cpu").dtype is torch.complex64


def test_tensor_of_complex_numbers_is_a_complex_tensor():
    z = torch.tensor([1 + 2j, 3 - 1j])
    assert z.dtype == torch.complex64 and list(z.shape) == [2]
    assert z.real.tolist() == [1.0, 3.0] and z.imag.tolist() == [2.0, -1.0]
    assert torch.view_as_real(z * z).tolist() == [[-3.0, 4.0], [8.0, -6.0]]
    assert torch.tensor(np.array([1 + 1j])).dtype == torch.complex128  # (NumPy's width, as PyTorch)
    assert torch.tensor(2 - 3j).imag.item() == -3.0
    w = torch.tensor([1.0, 2.0], dtype=torch.complex64)
    assert w.real.tolist() == [1.0, 2.0] and w.imag.tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="complex values cannot become"):
        torch.tensor([1j], dtype=torch.float32)
