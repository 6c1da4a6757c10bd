"""lgamma, digamma, polygamma(1), mvlgamma and torch.special against PyTorch 1.13 over positive, small, large and
negative arguments (float64 and float32), with gradients (lgamma' = digamma, digamma' = trigamma)."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402

POINTS = [-3.7, -2.5, -0.3, 0.001, 0.1, 0.5, 1.0, 1.5, 2.0, 3.3, 5.9, 10.0, 50.0, 171.0]


def _np(t):
    return np.array(t.detach().tolist(), dtype=float)


@needs_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gamma_functions_match_pytorch(dtype):
    ours = torch.tensor(POINTS, dtype=getattr(torch, dtype))
    theirs = peer.tensor(POINTS, dtype=getattr(peer, dtype))
    tol = 1e-9 if dtype == "float64" else 2e-5
    for name, mine, want in (("lgamma", torch.lgamma(ours), peer.lgamma(theirs)),
                             ("digamma", torch.digamma(ours), peer.digamma(theirs)),
                             ("trigamma", torch.polygamma(1, ours), peer.polygamma(1, theirs)),
                             ("method", ours.lgamma(), theirs.lgamma()),
                             ("gammaln", torch.special.gammaln(ours), peer.special.gammaln(theirs)),
                             ("psi", torch.special.psi(ours), peer.special.psi(theirs))):
        got, expected = _np(mine), want.double().numpy()
        assert mine.dtype == ours.dtype, name
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=name)
    np.testing.assert_allclose(_np(torch.mvlgamma(ours[8:], 3)), peer.mvlgamma(theirs[8:], 3).double().numpy(),
                               rtol=tol)
    assert np.isnan(_np(torch.digamma(torch.tensor([0.0, -2.0])))).all()


@needs_torch
def test_gamma_gradients_match_pytorch():
    for fn in ("lgamma", "digamma"):
        x = torch.tensor([0.3, 0.7, 2.5, 4.0, 12.0], requires_grad=True)
        y = peer.tensor([0.3, 0.7, 2.5, 4.0, 12.0], requires_grad=True)
        getattr(torch, fn)(x).sum().backward()
        getattr(peer, fn)(y).sum().backward()
        np.testing.assert_allclose(_np(x.grad), y.grad.double().numpy(), rtol=1e-5, err_msg=fn)
    x = torch.tensor([0.5, 2.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch.lgamma, (x,)) and torch.autograd.gradcheck(torch.digamma, (x,))


@needs_torch
def test_special_functions_match_pytorch():
    values = [-10.0, -3.0, -0.5, 0.0, 0.25, 2.0]
    x, y = torch.tensor(values), peer.tensor(values)
    p, q = torch.tensor([0.0, 0.2, 0.5, 3.0]), peer.tensor([0.0, 0.2, 0.5, 3.0])
    cases = {
        "ndtr": (torch.special.ndtr(x), peer.special.ndtr(y)), "log_ndtr": (torch.special.log_ndtr(x),
                                                                          peer.special.log_ndtr(y)),
        "expit": (torch.special.expit(x), peer.special.expit(y)), "erfc": (torch.special.erfc(x), peer.special.erfc(y)),
        "logit": (torch.special.logit(p[1:3]), peer.special.logit(q[1:3])),
        "entr": (torch.special.entr(torch.tensor([0.0, 0.5, -1.0])), peer.special.entr(peer.tensor([0.0, 0.5, -1.0]))),
        "xlog1py": (torch.special.xlog1py(p, p), peer.special.xlog1py(q, q)),
        "xlogy": (torch.special.xlogy(p, p), peer.special.xlogy(q, q)),
        "sinc": (torch.special.sinc(x), peer.special.sinc(y)), "exp2": (torch.special.exp2(x), peer.special.exp2(y)),
        "logsumexp": (torch.special.logsumexp(x, 0), peer.special.logsumexp(y, 0)),
        "multigammaln": (torch.special.multigammaln(torch.tensor([3.5]), 2), peer.special.multigammaln(
            peer.tensor([3.5]), 2)),
    }
    for name, (mine, want) in cases.items():
        np.testing.assert_allclose(_np(mine), want.double().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
