"""torch.autograd.forward_ad (dual_level, make_dual, unpack_dual) against PyTorch 1.13's forward mode, several
duals at once, outside-the-level errors; and torch.autograd's Variable, inference_mode and the grad_mode /
anomaly_mode / variable modules scripts import from."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.autograd.forward_ad as fwAD  # noqa: E402


def _run(lib, forward_ad, x, w, tx, tw):
    with forward_ad.dual_level():
        dx = forward_ad.make_dual(lib.tensor(x), lib.tensor(tx))
        dw = forward_ad.make_dual(lib.tensor(w), lib.tensor(tw))
        out = lib.softmax(dx @ dw, dim=-1).tanh().sum(0) * 2
        primal, tangent = forward_ad.unpack_dual(out)
        return primal.detach().numpy(), tangent.numpy()


@needs_torch
def test_forward_mode_matches_pytorchs():
    import torch.autograd.forward_ad as peer_fwad
    rng = np.random.default_rng(0)
    x, w, tx, tw = (rng.standard_normal(s) for s in ((3, 4), (4, 5), (3, 4), (4, 5)))
    ours, theirs = _run(torch, fwAD, x, w, tx, tw), _run(peer, peer_fwad, x, w, tx, tw)
    assert np.allclose(ours[0], theirs[0]) and np.allclose(ours[1], theirs[1], atol=1e-10)


def test_duals_constants_and_levels():
    x, t = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, t)
        assert fwAD.unpack_dual(dual).primal is x and fwAD.unpack_dual(dual).tangent is t
        assert fwAD.unpack_dual(torch.ones(2)).tangent is None
        assert torch.allclose(fwAD.unpack_dual(dual.exp()).tangent, x.exp() * t)
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(x, torch.ones(4, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="dual_level"):
        fwAD.make_dual(x, t)


def test_variable_and_grad_mode_modules():
    from trainrun.autograd import Variable
    from trainrun.autograd.anomaly_mode import detect_anomaly
    from trainrun.autograd.grad_mode import inference_mode, no_grad
    from trainrun.autograd.variable import Variable as same
    x = torch.ones(2)
    assert same is Variable and isinstance(x, Variable) and Variable(x) is x
    assert Variable(x, requires_grad=True).requires_grad and not x.requires_grad
    with no_grad():
        assert not (x.requires_grad_() * 2).requires_grad
    with inference_mode():
        assert not torch.is_grad_enabled()
    assert torch.autograd.inference_mode is inference_mode and detect_anomaly is torch.autograd.detect_anomaly
