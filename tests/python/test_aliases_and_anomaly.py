"""PyTorch's other names and small composites (_ops_aliases: multiply, floor_divide, logit, asinh/atanh/acosh,
erfc, sinc, hypot, signbit, copysign, heaviside, fmax, cov, corrcoef, the window functions, vander,
combinations, renorm, det/inverse/logdet/matrix_power/pinverse/svd, ...) against PyTorch 1.13, with gradients
where they are differentiable; anomaly mode's checks; Tensor.backward(inputs=)."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402


def _np(t):
    return np.array(t.detach().tolist(), dtype=float)


def _cases(lib):
    g = np.random.RandomState(0)
    x = lib.tensor(g.uniform(-2, 2, 6).astype(np.float32).tolist(), requires_grad=True)
    y = lib.tensor([1.0, -2.0, 0.5, -0.0, 3.0, 0.25], requires_grad=True)
    m = lib.tensor(g.randn(3, 3).astype(np.float32).tolist(), requires_grad=True)
    small = x.detach() / 3
    return {
        "multiply": lambda: lib.multiply(x, y), "divide": lambda: lib.divide(x, y + 5),
        "subtract": lambda: lib.subtract(x, y), "floor_divide": lambda: lib.floor_divide(x.detach(), y.detach() + 5),
        "greater": lambda: lib.greater(x, y), "less_equal": lambda: x.less_equal(y),
        "logit": lambda: lib.logit(lib.sigmoid(x)), "logit eps": lambda: lib.logit(lib.sigmoid(x * 5), eps=0.01),
        "asinh": lambda: lib.asinh(x), "atanh": lambda: lib.atanh(small * 0.9), "acosh": lambda: lib.acosh(x.abs() + 1),
        "erfc": lambda: lib.erfc(x), "sinc": lambda: lib.sinc(x), "hypot": lambda: lib.hypot(x, y),
        "logaddexp2": lambda: lib.logaddexp2(x, y), "deg2rad": lambda: lib.deg2rad(x), "rad2deg": lambda: x.rad2deg(),
        "signbit": lambda: lib.signbit(y), "copysign": lambda: lib.copysign(x, y),
        "heaviside": lambda: lib.heaviside(x.detach().round(), lib.tensor([0.5])),
        "float_power": lambda: lib.float_power(x.abs(), 1.5), "fmax": lambda: lib.fmax(x, y),
        "dist": lambda: lib.dist(x, y, 3), "vdot": lambda: lib.vdot(x, y),
        "cov": lambda: lib.cov(lib.stack([x, y])), "corrcoef": lambda: lib.corrcoef(lib.stack([x, y])),
        "msort": lambda: lib.msort(lib.stack([x, y])), "ravel": lambda: lib.ravel(m),
        "hsplit": lambda: lib.hsplit(m.reshape(9)[:8].reshape(2, 4), 2)[1],
        "diagflat": lambda: lib.diagflat(x[:3]), "addr": lambda: lib.addr(m, x[:3], y[:3], alpha=2),
        "renorm": lambda: m.renorm(2, 0, 1.0), "hann": lambda: lib.hann_window(8),
        "hamming symmetric": lambda: lib.hamming_window(7, periodic=False), "blackman": lambda: lib.blackman_window(6),
        "bartlett": lambda: lib.bartlett_window(7), "vander": lambda: lib.vander(x[:3], 4),
        "combinations": lambda: lib.combinations(x[:4], 2), "combinations r3": lambda: lib.combinations(
            x[:4], 3, with_replacement=True),
        "det": lambda: lib.det(m), "inverse": lambda: m.inverse(), "logdet": lambda: lib.logdet(m @ m.t()),
        "matrix_power": lambda: lib.matrix_power(m, 3), "matrix_power -2": lambda: lib.matrix_power(m, -2),
        "pinverse": lambda: lib.pinverse(m.detach()[:, :2]), "svd": lambda: (lambda u, s, v: u @ lib.diag(s) @ v.t())(
            *lib.svd(m)),
        "byte": lambda: (x.detach().abs() * 10).byte(), "char": lambda: (x.detach() * 10).char(),
    }, x, y, m


@needs_torch
def test_aliases_and_composites_match_pytorch():
    for name in _cases(torch)[0]:
        ours, ox, oy, om = _cases(torch)  # (fresh inputs per case)
        theirs, tx, ty, tm = _cases(peer)
        a, b = ours[name](), theirs[name]()
        assert a.dtype.name.replace("trainrun.", "") == str(b.dtype).replace("torch.", ""), name
        np.testing.assert_allclose(_np(a), b.detach().double().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
        if a.requires_grad and b.requires_grad and name != "vander":  # (1.13's own vander backward fails)
            a.sum().backward()
            b.sum().backward()
            for mine, peers in ((ox, tx), (oy, ty), (om, tm)):
                want = np.zeros(tuple(peers.shape)) if peers.grad is None else peers.grad.double().numpy()
                got = np.zeros(tuple(mine.shape)) if mine.grad is None else _np(mine.grad)
                np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=f"{name} gradient")
    x = torch.ones(2)
    assert x.get_device() == -1 and not x.is_complex() and x.conj() is x


def test_anomaly_mode_names_a_nan_root_or_gradient():
    x = torch.ones(2, requires_grad=True)
    assert not torch.autograd.is_anomaly_enabled()
    with torch.autograd.set_detect_anomaly(True):
        assert torch.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match="root 0 of the backward pass .* NaN or infinite"):
            (x * float("nan")).sum().backward()
        with pytest.raises(RuntimeError, match="gradient of input 0 .* NaN"):
            torch.autograd.grad((x * 0.0).sqrt().sum(), x)  # d sqrt(0) * 0: NaN
    assert not torch.autograd.is_anomaly_enabled()
    (x * float("nan")).sum().backward()  # (off again: no check)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        with torch.autograd.detect_anomaly(check_nan=False):
            (x * float("nan")).sum().backward()


def test_backward_with_inputs_from_the_tensor():
    a, b = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    (a * 2 + b * 3).sum().backward(inputs=[a])
    assert torch.equal(a.grad, torch.full([2], 2.0)) and b.grad is None


@needs_torch
def test_floor_division_operators_match_pytorch():
    for values, divisor in (([7, -7, 0], 3), ([7.0, -7.5, 0.25], 2)):
        ours, theirs = torch.tensor(values), peer.tensor(values)
        assert (ours // divisor).tolist() == (theirs // divisor).tolist()
        assert (divisor // (ours + 10)).tolist() == (divisor // (theirs + 10)).tolist()
        assert (ours // (ours.abs() + 1)).tolist() == (theirs // (theirs.abs() + 1)).tolist()
        ours //= 2
        theirs //= 2
        assert ours.tolist() == theirs.tolist()
    m = torch.ones(2, 3)
    assert torch.equal(torch.ones(3, 2).__rmatmul__(m), m @ torch.ones(3, 2))


@needs_torch
def test_index_put_put_shifts_and_corrections_match_pytorch():
    values = [[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]]
    ours, theirs = torch.tensor(values), peer.tensor(values)
    index_ours = (torch.tensor([0, 0, 1]), torch.tensor([1, 1, 2]))
    index_theirs = (peer.tensor([0, 0, 1]), peer.tensor([1, 1, 2]))
    for accumulate in (False, True):
        got = ours.clone().index_put_(index_ours, torch.tensor([1.0, 2.0, 3.0]), accumulate=accumulate)
        want = theirs.clone().index_put_(index_theirs, peer.tensor([1.0, 2.0, 3.0]), accumulate=accumulate)
        assert got.tolist() == want.tolist(), accumulate
        got = ours.clone().put_(torch.tensor([0, 0, 4]), torch.tensor([7.0, 8.0, 9.0]), accumulate=accumulate)
        want = theirs.clone().put_(peer.tensor([0, 0, 4]), peer.tensor([7.0, 8.0, 9.0]), accumulate=accumulate)
        assert got.tolist() == want.tolist(), accumulate
    assert torch.index_put(ours, index_ours, torch.tensor(9.0)).tolist() == peer.index_put(
        theirs, index_theirs, peer.tensor(9.0)).tolist()
    repeated = ours.clone()
    repeated[torch.tensor([0, 0])] = torch.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])  # the last write wins
    assert repeated.tolist() == [[2.0, 2.0, 2.0], [0.0, 5.0, 4.0]]
    assert torch.zeros(3).index_copy(0, torch.tensor([1, 1]), torch.tensor([4.0, 9.0])).tolist() == [0.0, 9.0, 0.0]
    for correction in (0, 1, 2):
        np.testing.assert_allclose(_np(ours.var(dim=1, correction=correction)),
                                   theirs.var(dim=1, correction=correction).numpy(), rtol=1e-6)
        np.testing.assert_allclose(_np(torch.std(ours, dim=(0, 1), correction=correction)),
                                   peer.std(theirs, dim=(0, 1), correction=correction).numpy(), rtol=1e-6)
    ints_ours, ints_theirs = torch.tensor([7, -7, 3]), peer.tensor([7, -7, 3])
    assert (ints_ours << 2).tolist() == (ints_theirs << 2).tolist()
    assert (ints_ours >> 1).tolist() == (ints_theirs >> 1).tolist()
    assert ours.sgn().tolist() == theirs.sgn().tolist()
