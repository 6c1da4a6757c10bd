"""torch.stft/istft against PyTorch 1.13: windows shorter than n_fft, centred (reflect or constant) or not,
normalized, two-sided; the inverse's round trip and explicit length; gradients of a power spectrum."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun  # noqa: E402
from trainrun._complex import ComplexTensor  # noqa: E402


def _array(value):
    if isinstance(value, ComplexTensor):
        return value._pairs.detach().numpy()
    if value.is_complex():
        return np.stack([value.real.detach().numpy(), value.imag.detach().resolve_neg().numpy()], -1)
    return value.detach().numpy()


def _same(ours, theirs):
    a, b = _array(ours), _array(theirs)
    assert a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(b).max())))


CASES = [
    dict(n_fft=64), dict(n_fft=64, hop_length=10, win_length=48, window="hann"),
    dict(n_fft=32, hop_length=8, center=False, normalized=True), dict(n_fft=16, window="hann", pad_mode="constant"),
]


def _args(lib, case):
    case = dict(case)
    if case.get("window") == "hann":
        case["window"] = lib.hann_window(case.get("win_length", case["n_fft"]))
    return case


@needs_torch
@pytest.mark.parametrize("case", CASES)
def test_stft_and_istft_match_pytorch(case):
    x = np.random.RandomState(0).randn(2, 200).astype(np.float32)
    ours = trainrun.stft(trainrun.tensor(x), return_complex=True, **_args(trainrun, case))
    theirs = peer.stft(peer.tensor(x), return_complex=True, **_args(peer, case))
    _same(ours, theirs)
    inverse = {k: v for k, v in case.items() if k != "pad_mode"}
    _same(trainrun.istft(ours, length=200, **_args(trainrun, inverse)),
          peer.istft(theirs, length=200, **_args(peer, inverse)))
    if case.get("center", True):  # the round trip gives the signal back
        assert np.allclose(_array(trainrun.istft(ours, length=200, **_args(trainrun, inverse))), x, atol=1e-4)


@needs_torch
def test_stft_gradients_and_refusals():
    x = np.random.RandomState(1).randn(2, 120).astype(np.float32)
    grads = []
    for lib in (trainrun, peer):
        w = lib.tensor(x, requires_grad=True)
        (lib.stft(w, 32, window=lib.hann_window(32), return_complex=True).abs() ** 2).sum().backward()
        grads.append(w.grad)
    _same(grads[0], grads[1])
    with pytest.raises(RuntimeError, match="requires the return_complex parameter"):
        trainrun.stft(trainrun.tensor(x), 32)
    with pytest.raises(RuntimeError, match="window tensor of size equal to win_length=20"):
        trainrun.stft(trainrun.tensor(x), 32, win_length=20, window=trainrun.ones(16), return_complex=True)
