"""Gradients through gamma draws (implicit reparameterization, as PyTorch's): dx/da of a Gamma(a, 1) draw equals
PyTorch's torch._standard_gamma_grad, and the rsample gradients of Gamma, Dirichlet, Beta, StudentT and
FisherSnedecor average to the derivatives of their known means. Gamma.cdf is the regularized incomplete gamma."""
import math

import numpy as np

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun as torch  # noqa: E402
import trainrun.distributions as D  # noqa: E402
from trainrun.distributions.gamma import standard_gamma_grad  # noqa: E402


@needs_torch
def test_draw_gradient_equals_pytorchs():
    x = np.array([1e-8, 1e-3, 0.05, 0.3, 1.5, 12.0, 3.0, 0.8, 50.0, 200.0, 1e-30, 5.0])
    a = np.array([0.01, 0.1, 0.5, 0.5, 2.0, 10.0, 3.0, 7.9, 40.0, 210.0, 0.05, 0.9])
    ours = standard_gamma_grad(torch.tensor(x), torch.tensor(a)).numpy()
    theirs = peer._standard_gamma_grad(peer.tensor(a), peer.tensor(x)).numpy()
    # (PyTorch's is an approximation, within about 1e-3 of the exact value; ours is a float64 central difference)
    assert np.allclose(ours, theirs, rtol=1e-3, atol=0), np.c_[ours, theirs]


def _f64(*values):
    return [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]


def test_rsample_gradients_average_to_the_derivatives_of_the_means():
    torch.manual_seed(0)
    n = 100_000
    concentration, rate = _f64(3.0, 2.0)
    D.Gamma(concentration, rate).rsample((n,)).mean().backward()  # mean a / b
    assert abs(concentration.grad.item() - 0.5) < 0.01 and abs(rate.grad.item() + 0.75) < 0.015

    c, = _f64([1.0, 2.0, 3.0])
    D.Dirichlet(c).rsample((n,))[:, 0].mean().backward()  # mean c0 / sum(c)
    assert np.allclose(c.grad.numpy(), [5 / 36, -1 / 36, -1 / 36], atol=0.004), c.grad

    a, b = _f64(2.0, 3.0)
    D.Beta(a, b).rsample((n,)).mean().backward()  # mean a / (a + b)
    assert abs(a.grad.item() - 3 / 25) < 0.004 and abs(b.grad.item() + 2 / 25) < 0.004

    df, loc, scale = _f64(5.0, 1.0, 2.0)
    draws = D.StudentT(df, loc, scale).rsample((n,))
    (draws.abs().mean()).backward()  # E|T| grows with the scale; df's gradient exists
    assert df.grad is not None and math.isfinite(df.grad.item()) and scale.grad.item() > 0

    d1, d2 = _f64(4.0, 10.0)
    D.FisherSnedecor(d1, d2).rsample((n,)).mean().backward()  # mean d2 / (d2 - 2): no d1 dependence
    assert abs(d1.grad.item()) < 0.02 and abs(d2.grad.item() + 2 / 64) < 0.01


@needs_torch
def test_gamma_cdf_is_the_regularized_incomplete_gamma():
    values = torch.tensor([0.1, 0.5, 1.0, 4.0])
    ours = D.Gamma(torch.tensor(2.0), torch.tensor(3.0)).cdf(values)
    theirs = peer.special.gammainc(peer.tensor(2.0), 3.0 * peer.tensor([0.1, 0.5, 1.0, 4.0]))
    assert np.allclose(ours.numpy(), theirs.numpy(), atol=1e-6)


@needs_torch
def test_cdf_and_icdf_through_transforms_equal_pytorch():
    value, u = [0.3, 0.7, 2.5], [0.1, 0.3, 0.9]
    for name, make, support in [
            ("LogNormal", lambda t: t.distributions.LogNormal(t.tensor(0.1), t.tensor(0.5)), value),
            ("Kumaraswamy", lambda t: t.distributions.Kumaraswamy(t.tensor(2.0), t.tensor(3.0)), [0.1, 0.3, 0.9])]:
        ours, theirs = make(torch), make(peer)
        assert np.allclose(ours.cdf(torch.tensor(support)).numpy(), theirs.cdf(peer.tensor(support)).numpy(),
                           atol=1e-6), name
        assert np.allclose(ours.icdf(torch.tensor(u)).numpy(), theirs.icdf(peer.tensor(u)).numpy(), atol=1e-5), name


def test_a_decreasing_transform_turns_the_cdf_around():
    # InverseGamma = 1 / Gamma: P(1/X <= v) = P(X >= 1/v) = 1 - gammainc(a, rate / v) (PyTorch 2.x's 0.4559)
    inverse = D.InverseGamma(torch.tensor([3.0]), torch.tensor([2.0]))
    expected = 1 - torch.special.gammainc(torch.tensor(3.0), torch.tensor(2.0 / 0.7)).item()
    assert abs(inverse.cdf(torch.tensor([0.7])).item() - expected) < 1e-6 and abs(expected - 0.4559) < 1e-4
    assert inverse.has_rsample
    rate, = _f64(2.0)
    D.InverseGamma(torch.tensor(3.0, dtype=torch.float64), rate).rsample((50_000,)).mean().backward()
    assert abs(rate.grad.item() - 0.5) < 0.02  # mean rate / (a - 1)
