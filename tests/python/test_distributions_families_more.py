"""ContinuousBernoulli, FisherSnedecor, Kumaraswamy and OneHotCategoricalStraightThrough: moments, entropy,
log_prob, cdf/icdf and modes against PyTorch 1.13 (ContinuousBernoulli across its Taylor region near 1/2), draws
whose means match, reparameterized gradients where PyTorch has them, and the straight-through estimator."""
import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.distributions as D  # noqa: E402


def ref_torch():
    return pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")


def close(ours, theirs, atol=1e-10):
    a, b = np.array(ours.tolist()), theirs.detach().numpy()
    assert a.shape == b.shape and np.array_equal(np.isnan(a), np.isnan(b)), (a, b)
    assert np.allclose(a[~np.isnan(a)], b[~np.isnan(b)], atol=atol, rtol=1e-9), (a, b)


CASES = {
    "ContinuousBernoulli": (lambda m: m.distributions.ContinuousBernoulli(
        m.tensor([0.1, 0.4995, 0.5, 0.7, 0.95], dtype=m.float64)), [0.2, 0.5, 0.9, 0.01, 0.99]),
    "FisherSnedecor": (lambda m: m.distributions.FisherSnedecor(m.tensor([1.5, 3.0, 6.0], dtype=m.float64),
                                                                 m.tensor([1.0, 5.0, 10.0], dtype=m.float64)),
                       [0.5, 1.2, 3.0]),
    "Kumaraswamy": (lambda m: m.distributions.Kumaraswamy(m.tensor([0.5, 2.0, 3.0], dtype=m.float64),
                                                          m.tensor([1.5, 0.7, 4.0], dtype=m.float64)),
                    [0.2, 0.5, 0.9]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_pytorch(name):
    ref = ref_torch()
    make, values = CASES[name]
    ours, theirs = make(torch), make(ref)
    for attr in ("mean", "variance") + (("mode",) if name != "ContinuousBernoulli" else ()):  # (PyTorch's CB: no mode)
        close(getattr(ours, attr), getattr(theirs, attr))
    close(ours.log_prob(torch.tensor(values, dtype=torch.float64)),
          theirs.log_prob(ref.tensor(values, dtype=ref.float64)))
    if name != "FisherSnedecor":
        close(ours.entropy(), theirs.entropy(), atol=1e-9)
    if name == "ContinuousBernoulli":
        v = torch.tensor(values, dtype=torch.float64)
        close(ours.cdf(v), theirs.cdf(ref.tensor(values, dtype=ref.float64)))
        close(ours.icdf(v), theirs.icdf(ref.tensor(values, dtype=ref.float64)))


def test_draws_and_gradients():
    torch.manual_seed(0)
    for dist, n in ((D.ContinuousBernoulli(torch.tensor([0.2, 0.8])), 40000),
                    (D.Kumaraswamy(torch.tensor([2.0, 0.7]), torch.tensor([3.0, 1.5])), 40000),
                    (D.FisherSnedecor(torch.tensor([5.0, 8.0]), torch.tensor([12.0, 20.0])), 40000)):
        draws = dist.sample((n,))
        assert draws.shape == (n, 2)
        assert torch.allclose(draws.mean(0), dist.mean.float(), atol=0.03), (type(dist).__name__, draws.mean(0))
    a = torch.tensor([2.0], requires_grad=True)
    D.Kumaraswamy(a, torch.tensor([3.0])).rsample((64,)).sum().backward()
    assert a.grad is not None and a.grad.abs().item() > 0
    p = torch.tensor([0.3], requires_grad=True)
    D.ContinuousBernoulli(p).rsample((64,)).sum().backward()
    assert p.grad is not None and p.grad.abs().item() > 0
    df1 = torch.tensor(2.0, requires_grad=True)  # (gamma draws carry implicit gradients)
    D.FisherSnedecor(df1, torch.tensor(3.0)).rsample((16,)).sum().backward()
    assert df1.grad is not None


def test_straight_through_one_hot():
    logits = torch.tensor([[1.0, 2.0, 0.5]], requires_grad=True)
    dist = D.OneHotCategoricalStraightThrough(logits=logits)
    draw = dist.rsample()
    assert draw.shape == (1, 3) and sorted(draw.detach().tolist()[0]) == [0.0, 0.0, 1.0]
    (draw * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    probs = logits.detach().softmax(-1)
    weights = torch.tensor([1.0, 2.0, 3.0])
    expected = probs * (weights - (probs * weights).sum(-1, keepdim=True))  # (softmax's Jacobian times weights)
    assert torch.allclose(logits.grad, expected, atol=1e-6)
    assert isinstance(dist, D.OneHotCategorical) and dist.has_rsample


def test_exponential_family_base():
    from trainrun.distributions.exp_family import ExponentialFamily
    from trainrun.distributions.kl import _kl_expfamily_expfamily as bregman
    for cls in (D.Normal, D.Bernoulli, D.Beta, D.Dirichlet, D.Exponential, D.Gamma, D.Chi2, D.Poisson,
                D.ContinuousBernoulli):
        assert issubclass(cls, ExponentialFamily) and D.ExponentialFamily is ExponentialFamily
    assert not issubclass(D.Laplace, ExponentialFamily)
    pairs = [(D.Normal(torch.tensor([0.3, -1.0]), torch.tensor([1.2, 0.5])),
              D.Normal(torch.tensor([0.0, 1.0]), torch.tensor([2.0, 0.7]))),
             (D.Bernoulli(torch.tensor([0.3, 0.8])), D.Bernoulli(torch.tensor([0.5, 0.1]))),
             (D.Gamma(torch.tensor([2.0, 0.7]), torch.tensor([1.5, 3.0])),
              D.Gamma(torch.tensor([1.0, 2.0]), torch.tensor([2.5, 0.9]))),
             (D.Beta(torch.tensor([2.0, 0.7]), torch.tensor([1.5, 3.0])),
              D.Beta(torch.tensor([1.0, 2.0]), torch.tensor([2.5, 0.9]))),
             (D.Dirichlet(torch.tensor([[2.0, 0.7, 1.0]])), D.Dirichlet(torch.tensor([[1.0, 2.0, 3.0]]))),
             (D.Poisson(torch.tensor([2.0, 0.5])), D.Poisson(torch.tensor([1.0, 3.0])))]
    for p, q in pairs:  # the Bregman divergence equals each family's closed-form KL
        assert torch.allclose(bregman(p, q), D.kl_divergence(p, q), atol=1e-5), type(p).__name__
    for p, _ in pairs[:3]:  # and the generic entropy the closed form (families whose carrier measure is 0)
        assert torch.allclose(ExponentialFamily.entropy(p), p.entropy(), atol=1e-5)
    with pytest.raises(NotImplementedError, match="different exponential families"):
        D.kl_divergence(D.Bernoulli(torch.tensor(0.3)), D.Normal(0.0, 1.0))


def test_logistic_normal_and_event_changing_transforms():
    """A transform whose events span more dims than the base's (stick-breaking: a vector, n -> n + 1) makes the
    transformed distribution's event shape, as PyTorch's TransformedDistribution does."""
    ref = ref_torch()
    for loc, scale, values in (([0.1, -0.3, 0.5], [1.0, 0.7, 1.3], [0.2, 0.3, 0.1, 0.4]),
                               ([[0.0] * 3] * 2, [[1.0] * 3] * 2, [[0.2, 0.3, 0.1, 0.4], [0.1, 0.1, 0.1, 0.7]])):
        ours = D.LogisticNormal(torch.tensor(loc), torch.tensor(scale))
        theirs = ref.distributions.LogisticNormal(ref.tensor(loc), ref.tensor(scale))
        assert tuple(ours.batch_shape) == tuple(theirs.batch_shape) and tuple(ours.event_shape) == (4,)
        close(ours.log_prob(torch.tensor(values)), theirs.log_prob(ref.tensor(values)), atol=1e-5)
    draws = D.LogisticNormal(torch.zeros(3), torch.ones(3)).rsample((6,))
    assert draws.shape == (6, 4) and torch.allclose(draws.sum(-1), torch.ones(6), atol=1e-5) and bool((draws > 0).all())
    scalar = D.LogisticNormal(torch.tensor(0.5), torch.tensor(2.0))
    assert tuple(scalar.event_shape) == (2,) and scalar.loc.shape == (1,)


def test_expand():
    ref = ref_torch()
    cases = [(lambda m: m.distributions.Normal(m.tensor(0.5), m.tensor(2.0)), [3, 2]),
             (lambda m: m.distributions.MultivariateNormal(m.zeros(2), m.eye(2)), [4]),
             (lambda m: m.distributions.Independent(m.distributions.Normal(m.zeros(3), m.ones(3)), 1), [2]),
             (lambda m: m.distributions.OneHotCategorical(m.tensor([0.2, 0.8])), [5]),
             (lambda m: m.distributions.Gamma(m.tensor([1.0, 2.0]), m.tensor([1.0, 3.0])), [4, 2])]
    for make, shape in cases:
        ours, theirs = make(torch).expand(shape), make(ref).expand(shape)
        assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
        assert tuple(ours.event_shape) == tuple(theirs.event_shape)
        assert tuple(ours.sample().shape) == tuple(theirs.sample().shape)
        value = theirs.sample()
        close(ours.log_prob(torch.tensor(value.tolist())), theirs.log_prob(value), atol=1e-5)


def test_von_mises():
    ref = ref_torch()
    loc, k = [0.5, -2.0, 3.0], [0.2, 2.0, 50.0]
    ours = D.VonMises(torch.tensor(loc, dtype=torch.float64), torch.tensor(k, dtype=torch.float64))
    theirs = ref.distributions.VonMises(ref.tensor(loc, dtype=ref.float64), ref.tensor(k, dtype=ref.float64))
    x = [0.1, -2.5, 3.1]
    # (1.13's log I0 is a polynomial fit good to ~1e-7; trainrun's is the scaled Bessel function)
    close(ours.log_prob(torch.tensor(x, dtype=torch.float64)), theirs.log_prob(ref.tensor(x, dtype=ref.float64)),
          atol=1e-6)
    close(ours.variance, theirs.variance, atol=1e-6)
    torch.manual_seed(0)
    draws = ours.sample((20000,))
    assert draws.shape == (20000, 3) and bool((draws >= -3.1416).all()) and bool((draws < 3.1416).all())
    mean_direction = torch.atan2(draws.sin().mean(0), draws.cos().mean(0))
    resultant = (draws.cos().mean(0).pow(2) + draws.sin().mean(0).pow(2)).sqrt()
    assert torch.allclose(mean_direction[1:], ours.loc[1:], atol=0.05)  # (k = 0.2: too flat to place well)
    assert torch.allclose(resultant, 1 - ours.variance, atol=0.02)  # (E[cos(x - loc)] = I1(k) / I0(k))


def test_wishart():
    ref = ref_torch()
    cov = [[2.0, 0.3, 0.1], [0.3, 1.5, -0.2], [0.1, -0.2, 1.0]]
    for df in (4.0, 7.5):
        ours = D.Wishart(torch.tensor(df, dtype=torch.float64), covariance_matrix=torch.tensor(cov, dtype=torch.float64))
        theirs = ref.distributions.Wishart(ref.tensor(df, dtype=ref.float64),
                                           covariance_matrix=ref.tensor(cov, dtype=ref.float64))
        value = ref.tensor([[3.0, 0.5, 0.2], [0.5, 2.0, -0.1], [0.2, -0.1, 1.5]], dtype=ref.float64)
        close(ours.log_prob(torch.tensor(value.tolist(), dtype=torch.float64)), theirs.log_prob(value))
        close(ours.entropy(), theirs.entropy(), atol=1e-9)
        for attr in ("mean", "variance", "mode"):
            close(getattr(ours, attr), getattr(theirs, attr))
    assert isinstance(ours, D.ExponentialFamily)
    torch.manual_seed(0)
    draws = D.Wishart(torch.tensor(6.0, dtype=torch.float64),
                      scale_tril=torch.linalg.cholesky(torch.tensor(cov, dtype=torch.float64))).sample((20000,))
    assert draws.shape == (20000, 3, 3) and torch.allclose(draws, draws.transpose(-2, -1))
    assert torch.allclose(draws.mean(0), 6.0 * torch.tensor(cov, dtype=torch.float64), atol=0.15)
    with pytest.raises(ValueError, match="Exactly one of"):
        D.Wishart(torch.tensor(5.0))


def test_lkj_cholesky():
    ref = ref_torch()
    for dim, c in ((2, 0.5), (3, 1.0), (4, 2.5)):
        theirs = ref.distributions.LKJCholesky(dim, ref.tensor([c, 2 * c], dtype=ref.float64))
        ours = D.LKJCholesky(dim, torch.tensor([c, 2 * c], dtype=torch.float64))
        value = theirs.sample()
        close(ours.log_prob(torch.tensor(value.tolist(), dtype=torch.float64)), theirs.log_prob(value))
        assert tuple(ours.batch_shape) == (2,) and tuple(ours.event_shape) == (dim, dim)
    torch.manual_seed(0)
    factors = D.LKJCholesky(3, torch.tensor(2.0)).sample((5000,))
    corr = factors @ factors.transpose(-2, -1)
    assert torch.allclose(corr.diagonal(dim1=-2, dim2=-1), torch.ones(5000, 3), atol=1e-5)
    assert bool((factors.triu(1) == 0).all())
    off = corr[:, 0, 1]
    assert abs(off.mean().item()) < 0.03 and abs(off.var().item() - 1 / (2 * 2.0 + 3 - 1)) < 0.015  # 1/(2 eta + d - 1)
    with pytest.raises(ValueError, match="greater than or equal to 2"):
        D.LKJCholesky(1)


def test_corr_cholesky_transform():
    """biject_to(corr_cholesky): reals -> Cholesky factors of correlation matrices, equal to 1.13's, invertible,
    with 1.13's log-determinant; an LKJCholesky over the transformed reals is what probabilistic programs build."""
    ref = ref_torch()
    x = np.random.RandomState(0).randn(2, 6)
    ours, theirs = D.biject_to(D.constraints.corr_cholesky), ref.distributions.biject_to(
        ref.distributions.constraints.corr_cholesky)
    assert isinstance(ours, D.CorrCholeskyTransform)
    y, ry = ours(torch.tensor(x)), theirs(ref.tensor(x))
    close(y, ry, atol=1e-12)
    assert np.allclose(np.array(ours.inv(y).tolist()), x, atol=1e-10)
    close(ours.log_abs_det_jacobian(torch.tensor(x), y), theirs.log_abs_det_jacobian(ref.tensor(x), ry), atol=1e-10)
    corr = y @ y.transpose(-2, -1)
    assert torch.allclose(corr.diagonal(dim1=-2, dim2=-1), torch.ones(2, 4, dtype=torch.float64))
    assert ours.forward_shape((2, 6)) == (2, 4, 4) and ours.inverse_shape((2, 4, 4)) == (2, 6)
    with pytest.raises(ValueError, match="not a flattend lower-diagonal number"):
        ours.forward_shape((5,))
    assert torch.isfinite(D.LKJCholesky(4, 2.0).log_prob(y)).all()


def test_cat_and_stack_transforms():
    ref = ref_torch()
    x = np.random.RandomState(0).rand(4, 5) + 0.1

    def cat(m):
        T = m.distributions.transforms
        return T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], dim=1, lengths=[2, 3])

    def stack(m):
        T = m.distributions.transforms
        return T.StackTransform([T.ExpTransform(), T.PowerTransform(m.tensor(2.0, dtype=m.float64)),
                                 T.SigmoidTransform(), T.TanhTransform()], dim=0)
    for make in (cat, stack):
        ours, theirs = make(torch), make(ref)
        y, ry = ours(torch.tensor(x)), theirs(ref.tensor(x))
        close(y, ry, atol=1e-12)
        close(ours.log_abs_det_jacobian(torch.tensor(x), y), theirs.log_abs_det_jacobian(ref.tensor(x), ry),
              atol=1e-12)
        assert np.allclose(np.array(ours.inv(y).tolist()), x, atol=1e-12) and ours.bijective
    with pytest.raises(ValueError, match="the transforms take 5"):
        cat(torch)(torch.ones(4, 6, dtype=torch.float64))


def test_family_module_paths():
    from trainrun.distributions.half_cauchy import HalfCauchy
    from trainrun.distributions.pareto import Pareto
    from trainrun.distributions.relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
    from trainrun.distributions.relaxed_categorical import ExpRelaxedCategorical, RelaxedOneHotCategorical
    from trainrun.distributions.studentT import StudentT
    from trainrun.distributions.von_mises import VonMises
    from trainrun.distributions.lkj_cholesky import LKJCholesky
    assert HalfCauchy is D.HalfCauchy and Pareto is D.Pareto and RelaxedBernoulli is D.RelaxedBernoulli
    assert RelaxedOneHotCategorical is D.RelaxedOneHotCategorical and StudentT is D.StudentT
    assert VonMises is D.VonMises and LKJCholesky is D.LKJCholesky
    assert LogitRelaxedBernoulli.__name__ == "LogitRelaxedBernoulli" and ExpRelaxedCategorical is not None
