"""trainrun.fft against PyTorch 1.13's torch.fft: every transform with its n/s, dim and norm arguments, on
lengths that take the direct product (short), the four-step split (96, 4096) and the prime path (131), real and
complex inputs, round trips, frequencies and shifts, and gradients through rfft/irfft."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun  # noqa: E402
from trainrun._complex import ComplexTensor  # noqa: E402


def _array(value):
    if isinstance(value, ComplexTensor):
        return value._pairs.detach().numpy()
    if hasattr(value, "is_complex") and value.is_complex():
        return np.stack([value.real.detach().resolve_neg().numpy(), value.imag.detach().resolve_neg().numpy()], -1)
    return value.detach().numpy()


def _same(ours, theirs, tol=1e-4):
    a, b = _array(ours), _array(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = max(1.0, float(np.abs(b).max()))
    assert np.allclose(a, b, rtol=tol, atol=tol * scale), float(np.abs(a - b).max())


CASES = [
    ("fft", lambda F, x: F.fft(x)), ("fft n ortho", lambda F, x: F.fft(x, n=100, norm="ortho")),
    ("ifft", lambda F, x: F.ifft(F.fft(x, n=97))), ("ifft forward", lambda F, x: F.ifft(x, norm="forward")),
    ("rfft", lambda F, x: F.rfft(x)), ("irfft", lambda F, x: F.irfft(F.rfft(x))),
    ("irfft odd n", lambda F, x: F.irfft(F.rfft(x), n=95, norm="forward")),
    ("hfft", lambda F, x: F.hfft(F.rfft(x)[:, :20])), ("ihfft", lambda F, x: F.ihfft(x, norm="ortho")),
    ("fft dim 0", lambda F, x: F.fft(x, dim=0)),
]
CASES_2D = [
    ("fft2", lambda F, x: F.fft2(x)), ("rfft2 s", lambda F, x: F.rfft2(x, s=(8, 9))),
    ("irfft2", lambda F, x: F.irfft2(F.rfft2(x))), ("fftn dims", lambda F, x: F.fftn(x, dim=(0, 2), norm="forward")),
    ("ifftn", lambda F, x: F.ifftn(x)), ("rfftn", lambda F, x: F.rfftn(x)),
    ("irfftn", lambda F, x: F.irfftn(F.rfftn(x), s=(10, 12))), ("ifft2 complex", lambda F, x: F.ifft2(F.fft2(x))),
    ("fftshift", lambda F, x: F.fftshift(x, dim=(1, 2))), ("ifftshift", lambda F, x: F.ifftshift(F.fftshift(x))),
    ("ihfftn", lambda F, x: F.ihfftn(x)), ("ihfft2 ortho", lambda F, x: F.ihfft2(x, norm="ortho")),
    ("hfftn", lambda F, x: F.hfftn(F.rfftn(x)[..., :5])), ("hfft2 s", lambda F, x: F.hfft2(F.rfft2(x), s=(10, 9))),
    ("hfftn forward", lambda F, x: F.hfftn(F.ihfftn(x), s=(2, 10, 12), norm="forward")),
]


@needs_torch
@pytest.mark.parametrize("name,transform", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("length", [12, 96, 131])
def test_one_dim_transforms_match_pytorch(name, transform, length):
    x = np.random.RandomState(length).randn(3, length).astype(np.float32)
    _same(transform(trainrun.fft, trainrun.tensor(x)), transform(peer.fft, peer.tensor(x)))


@needs_torch
@pytest.mark.parametrize("name,transform", CASES_2D, ids=[c[0] for c in CASES_2D])
def test_multi_dim_transforms_match_pytorch(name, transform):
    x = np.random.RandomState(1).randn(2, 10, 12).astype(np.float32)
    _same(transform(trainrun.fft, trainrun.tensor(x)), transform(peer.fft, peer.tensor(x)))


@needs_torch
def test_long_transforms_frequencies_and_gradients_match_pytorch():
    x = np.random.RandomState(2).randn(2, 4096).astype(np.float32)
    _same(trainrun.fft.fft(trainrun.tensor(x)), peer.fft.fft(peer.tensor(x)), tol=1e-4)
    _same(trainrun.fft.fftfreq(7, d=0.5), peer.fft.fftfreq(7, d=0.5))
    _same(trainrun.fft.rfftfreq(8), peer.fft.rfftfreq(8))
    grads = []
    for lib in (trainrun, peer):
        w = lib.tensor(np.random.RandomState(3).randn(2, 60).astype(np.float32), requires_grad=True)
        spectrum = lib.fft.rfft(w)
        ((spectrum.abs() ** 2).sum() + lib.fft.irfft(spectrum * 0.5, n=60).pow(3).sum()).backward()
        grads.append(w.grad)
    _same(grads[0], grads[1])


def test_bad_arguments_are_refused_by_name():
    x = trainrun.randn(4, 8)
    with pytest.raises(ValueError, match='Invalid normalization mode: "half"'):
        trainrun.fft.fft(x, norm="half")
    with pytest.raises(RuntimeError, match="Invalid number of data points \\(0\\)"):
        trainrun.fft.fft(x, n=0)
    with pytest.raises(RuntimeError, match="rfft expects a real input"):
        trainrun.fft.rfft(trainrun.fft.fft(x))
    with pytest.raises(RuntimeError, match="dim and shape arguments must have the same length"):
        trainrun.fft.fftn(x, s=(4,), dim=(0, 1))


@needs_torch
def test_spectra_take_pytorchs_complex_helpers():
    """What code does with a spectrum: torch.abs/angle/conj, sum/mean, powers; real tensors keep their abs."""
    ours, theirs = trainrun.fft.rfft(trainrun.arange(8.)), peer.fft.rfft(peer.arange(8.))
    _same(trainrun.abs(ours), peer.abs(theirs))
    _same(trainrun.angle(ours)[:4], peer.angle(theirs)[:4])  # (the last bin sits on the branch cut at -pi/pi)
    _same(trainrun.conj(ours), peer.conj(theirs).resolve_conj())
    _same(ours.sum(), theirs.sum())
    _same(ours.mean(), theirs.mean())
    _same(ours ** 3, theirs ** 3)
    assert trainrun.abs(trainrun.tensor([-3])).tolist() == [3]
    _same(trainrun.angle(trainrun.tensor([-1., 2.])), peer.angle(peer.tensor([-1., 2.])))
