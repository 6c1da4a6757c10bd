"""torch.distributions' constraints (checks, reprs, a family's support and arg_constraints as objects, the
automatic parameter check of a user's subclass), biject_to/transform_to onto each constraint, the new transforms,
and the families HalfNormal, Cauchy, HalfCauchy, Gumbel, StudentT, Chi2, Geometric, Weibull, Pareto,
Multinomial, NegativeBinomial, InverseGamma, MixtureSameFamily, RelaxedBernoulli and RelaxedOneHotCategorical:
log_prob, cdf, entropy and moments against PyTorch 1.13, sample moments, and reparameterized gradients."""
import math

import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
from trainrun.distributions import constraints  # noqa: E402

D = torch.distributions


def _close(ours, theirs, atol=1e-5):
    a, b = np.asarray(ours.detach().numpy(), dtype=np.float64), np.asarray(theirs.detach().numpy(), dtype=np.float64)
    assert a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=1e-5, equal_nan=True), (a, b)


def test_constraints_check_and_print_as_pytorchs():
    assert repr(constraints.positive) == "GreaterThan(lower_bound=0.0)"
    assert repr(constraints.real_vector) == "IndependentConstraint(Real(), 1)"
    assert repr(constraints.interval(0, 2)) == "Interval(lower_bound=0, upper_bound=2)"
    assert constraints.positive.check(torch.tensor([1.0, 0.0, -1.0])).tolist() == [True, False, False]
    assert constraints.nonnegative_integer.check(torch.tensor([0.0, 1.5, 3.0])).tolist() == [True, False, True]
    assert constraints.simplex.check(torch.tensor([[0.3, 0.7], [0.3, 0.3]])).tolist() == [True, False]
    matrices = torch.tensor([[[1.0, 0.0], [2.0, 3.0]], [[1.0, 1.0], [0.0, 1.0]]])
    assert constraints.lower_cholesky.check(matrices).tolist() == [True, False]
    assert constraints.positive_definite.check(torch.eye(3)).item() and \
        not constraints.positive_definite.check(-torch.eye(3)).item()
    assert constraints.independent(constraints.positive, 1).check(torch.tensor([[1.0, 2.0], [1.0, -2.0]])).tolist() == \
        [True, False]
    assert constraints.real_vector.event_dim == 1 and constraints.one_hot.is_discrete
    with pytest.raises(ValueError, match="dependent"):
        constraints.dependent.check(torch.ones(1))
    assert D.Normal.support is constraints.real and D.Normal.arg_constraints["scale"] is constraints.positive
    assert isinstance(D.Categorical(logits=torch.zeros(3)).support, constraints.Constraint)
    assert D.Uniform(0.0, 2.0).support.check(torch.tensor([1.0, 3.0])).tolist() == [True, False]
    assert repr(D.Independent(D.Normal(torch.zeros(3, 2), torch.ones(3, 2)), 1).support) == \
        "IndependentConstraint(Real(), 1)"
    squashed = D.TransformedDistribution(D.Normal(torch.zeros(2), torch.ones(2)), [D.transforms.TanhTransform()])
    assert repr(squashed.support) == "Interval(lower_bound=-1.0, upper_bound=1.0)"
    assert D.OneHotCategorical(logits=torch.zeros(3)).support is constraints.one_hot


class Scaled(D.Distribution):
    """A user's family in PyTorch's style: arg_constraints as constraints, checked at construction."""
    arg_constraints = {"scale": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, validate_args=None):
        self.scale = torch.as_tensor(scale)
        super().__init__(self.scale.shape, validate_args=validate_args)

    def log_prob(self, value):
        self._validate_sample(value) if hasattr(self, "_validate_sample") else None
        return -value / self.scale - self.scale.log()


def test_a_users_family_gets_its_parameters_and_samples_checked():
    with pytest.raises(ValueError, match="Expected parameter scale .* to satisfy the constraint "
                                         "GreaterThan\\(lower_bound=0.0\\)"):
        Scaled(torch.tensor([1.0, -1.0]))
    assert Scaled(torch.tensor([1.0, -1.0]), validate_args=False).scale.shape == (2,)


@pytest.mark.parametrize("constraint", [constraints.real, constraints.positive, constraints.greater_than(2.0),
                                        constraints.less_than(-1.0), constraints.interval(-1.0, 3.0),
                                        constraints.unit_interval, constraints.simplex, constraints.real_vector,
                                        constraints.lower_cholesky, constraints.positive_definite])
def test_transforms_onto_each_constraint(constraint):
    from trainrun.distributions import biject_to, transform_to
    x = torch.randn(3, 4, 4, dtype=torch.float64)
    for registry in (biject_to, transform_to):
        transform = registry(constraint)
        y = transform(x)
        assert bool(constraint.check(y).all()), (constraint, registry)
        if registry is biject_to and constraint not in (constraints.positive_definite, constraints.lower_cholesky):
            assert torch.allclose(transform.inv(y), x, atol=1e-6)


@needs_torch
def test_new_transforms_match():
    x = np.random.default_rng(0).standard_normal((3, 4))
    for name, args in (("StickBreakingTransform", ()), ("SoftplusTransform", ()), ("AbsTransform", ())):
        ours, theirs = getattr(D.transforms, name)(*args), getattr(peer.distributions.transforms, name)(*args)
        y, py = ours(torch.tensor(x)), theirs(peer.tensor(x))
        _close(y, py)
        if name != "AbsTransform":
            _close(ours.log_abs_det_jacobian(torch.tensor(x), y), theirs.log_abs_det_jacobian(peer.tensor(x), py))
            _close(ours.inv(y), peer.tensor(x))
    m = np.random.default_rng(1).standard_normal((2, 3, 3))
    _close(D.transforms.LowerCholeskyTransform()(torch.tensor(m)),
           peer.distributions.transforms.LowerCholeskyTransform()(peer.tensor(m)))
    reshape = D.transforms.ReshapeTransform((4,), (2, 2))
    assert reshape(torch.tensor(x)).shape == (3, 2, 2) and reshape.forward_shape((5, 4)) == (5, 2, 2)
    independent = D.transforms.IndependentTransform(D.transforms.ExpTransform(), 1)
    assert independent.log_abs_det_jacobian(torch.tensor(x), independent(torch.tensor(x))).shape == (3,)


def _families():
    scale, loc, df = [0.5, 2.0], [0.0, -1.0], [1.5, 5.0]
    return [
        ("HalfNormal", (scale,), [0.3, 2.5]), ("Cauchy", (loc, scale), [0.3, -2.5]),
        ("HalfCauchy", (scale,), [0.3, 2.5]),
        ("Gumbel", (loc, scale), [0.3, -0.5]), ("StudentT", (df, loc, scale), [0.3, -2.5]), ("Chi2", (df,), [0.3, 2.5]),
        ("Weibull", (scale, [1.5, 0.8]), [0.3, 2.5]), ("Pareto", (scale, [2.5, 3.5]), [1.0, 2.5]),
    ]


@needs_torch
@pytest.mark.parametrize("name,args,values", _families(), ids=[f[0] for f in _families()])
def test_continuous_families_match(name, args, values):
    ours = getattr(D, name)(*[torch.tensor(a) for a in args])
    theirs = getattr(peer.distributions, name)(*[peer.tensor(a) for a in args])
    _close(ours.log_prob(torch.tensor(values)), theirs.log_prob(peer.tensor(values)))
    for what in ("mean", "variance", "entropy", "mode"):
        try:
            expected = getattr(theirs, what)
            expected = expected() if callable(expected) else expected
        except NotImplementedError:
            continue
        got = getattr(ours, what)
        _close(got() if callable(got) else got, expected, atol=1e-4)
    if name not in ("StudentT", "Chi2", "InverseGamma"):
        _close(ours.cdf(torch.tensor(values)), theirs.cdf(peer.tensor(values)))
    torch.manual_seed(0)
    draws = ours.sample((20000,))
    assert draws.shape == (20000, 2)
    if name in ("HalfNormal", "Gumbel", "Chi2", "Weibull"):  # (within 5 standard errors)
        assert np.allclose(draws.mean(0).numpy(), theirs.mean.numpy(), rtol=0,
                           atol=5 * float(theirs.stddev.max()) / math.sqrt(20000))
    if ours.has_rsample:
        params = [torch.tensor(a, requires_grad=True) for a in args]
        getattr(D, name)(*params).rsample((100,)).sum().backward()
        assert all(p.grad is not None and bool(p.grad.isfinite().all()) for p in params)


def test_inverse_gamma_is_the_reciprocal_of_a_gamma():
    a, b = torch.tensor([2.5, 3.5]), torch.tensor([0.5, 2.0])
    ours, gamma = D.InverseGamma(a, b), D.Gamma(a, b)
    y = torch.tensor([0.3, 2.5])
    assert torch.allclose(ours.log_prob(y), gamma.log_prob(1 / y) - 2 * y.log(), atol=1e-5)
    assert torch.allclose(ours.mean, b / (a - 1)) and torch.allclose(ours.mode, b / (a + 1))
    torch.manual_seed(4)
    draws = ours.sample((40000,))
    assert torch.allclose(draws.mean(0), ours.mean, rtol=0.05)
    # entropy: E[-log p] over draws
    assert torch.allclose(-ours.log_prob(draws).mean(0), ours.entropy(), atol=0.05)


@needs_torch
def test_discrete_families_match():
    probs = [0.2, 0.7]
    values = torch.tensor([0.0, 3.0])
    _close(D.Geometric(torch.tensor(probs)).log_prob(values),
           peer.distributions.Geometric(peer.tensor(probs)).log_prob(peer.tensor([0.0, 3.0])))
    _close(D.Geometric(logits=torch.tensor([0.5, -1.0])).entropy(),
           peer.distributions.Geometric(logits=peer.tensor([0.5, -1.0])).entropy())
    nb, pnb = D.NegativeBinomial(torch.tensor([3.0, 5.0]), torch.tensor(probs)), \
        peer.distributions.NegativeBinomial(peer.tensor([3.0, 5.0]), peer.tensor(probs))
    _close(nb.log_prob(values), pnb.log_prob(peer.tensor([0.0, 3.0])))
    _close(nb.mean, pnb.mean)
    _close(nb.variance, pnb.variance)
    torch.manual_seed(1)
    assert np.allclose(nb.sample((20000,)).mean(0).numpy(), pnb.mean.numpy(), rtol=0.06)
    assert np.allclose(D.Geometric(torch.tensor(probs)).sample((20000,)).mean(0).numpy(),
                       peer.distributions.Geometric(peer.tensor(probs)).mean.numpy(), rtol=0.06)
    p = [[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]
    m, pm = D.Multinomial(6, torch.tensor(p)), peer.distributions.Multinomial(6, peer.tensor(p))
    counts = [[1.0, 2.0, 3.0], [6.0, 0.0, 0.0]]
    _close(m.log_prob(torch.tensor(counts)), pm.log_prob(peer.tensor(counts)))
    _close(m.entropy(), pm.entropy(), atol=1e-4)
    draws = m.sample((500,))
    assert draws.shape == (500, 2, 3) and bool((draws.sum(-1) == 6).all())


@needs_torch
def test_mixture_same_family_matches():
    logits = [[0.1, 0.5, -0.3], [1.0, 0.0, 0.0]]
    loc, scale = [[-2.0, 0.0, 3.0], [1.0, 2.0, 3.0]], [[0.5, 1.0, 2.0], [1.0, 1.0, 0.3]]
    ours = D.MixtureSameFamily(D.Categorical(logits=torch.tensor(logits)),
                               D.Normal(torch.tensor(loc), torch.tensor(scale)))
    theirs = peer.distributions.MixtureSameFamily(peer.distributions.Categorical(logits=peer.tensor(logits)),
                                                  peer.distributions.Normal(peer.tensor(loc), peer.tensor(scale)))
    x = [[0.3, -1.0], [2.0, 2.5]]
    _close(ours.log_prob(torch.tensor(x)), theirs.log_prob(peer.tensor(x)))
    _close(ours.mean, theirs.mean)
    _close(ours.variance, theirs.variance)
    _close(ours.cdf(torch.tensor(x)), theirs.cdf(peer.tensor(x)))
    torch.manual_seed(2)
    draws = ours.sample((20000,))
    assert draws.shape == (20000, 2) and np.allclose(draws.mean(0).numpy(), theirs.mean.numpy(), atol=0.08)
    mvn = D.MixtureSameFamily(D.Categorical(logits=torch.zeros(3)),
                              D.Independent(D.Normal(torch.randn(3, 2), torch.ones(3, 2)), 1))
    assert mvn.sample((4,)).shape == (4, 2) and mvn.log_prob(torch.zeros(4, 2)).shape == (4,)


@needs_torch
def test_relaxed_families_match_and_reparameterize():
    logits = [0.3, -1.2, 0.5]
    for name in ("RelaxedBernoulli", "RelaxedOneHotCategorical"):
        ours = getattr(D, name)(torch.tensor(0.7), logits=torch.tensor(logits))
        theirs = getattr(peer.distributions, name)(peer.tensor(0.7), logits=peer.tensor(logits))
        value = [0.2, 0.5, 0.3]
        _close(ours.log_prob(torch.tensor(value)), theirs.log_prob(peer.tensor(value)), atol=1e-4)
        torch.manual_seed(3)
        draw = ours.rsample((1000,))
        assert bool(((draw > 0) & (draw < 1)).all())
        if name == "RelaxedOneHotCategorical":
            assert torch.allclose(draw.sum(-1), torch.ones(1000), atol=1e-5)
        param = torch.tensor(logits, requires_grad=True)
        getattr(D, name)(torch.tensor(0.7), logits=param).rsample((10,)).pow(2).sum().backward()
        assert param.grad is not None and bool(param.grad.isfinite().all())
    assert math.isclose(D.RelaxedBernoulli(0.5, probs=torch.tensor([0.3])).probs.item(), 0.3, rel_tol=1e-6)


@needs_torch
def test_low_rank_multivariate_normal_matches_with_gradients():
    rng = np.random.default_rng(0)
    loc, factor = rng.standard_normal((2, 4)), rng.standard_normal((2, 4, 2))
    diag, x = rng.random((2, 4)) + 0.5, rng.standard_normal((3, 2, 4))
    ours_params = [torch.tensor(a, requires_grad=True) for a in (loc, factor, diag)]
    peer_params = [peer.tensor(a, requires_grad=True) for a in (loc, factor, diag)]
    ours, theirs = D.LowRankMultivariateNormal(*ours_params), peer.distributions.LowRankMultivariateNormal(
        *peer_params)
    for name in ("mean", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        _close(getattr(ours, name), getattr(theirs, name), atol=1e-10)
    _close(ours.entropy(), theirs.entropy(), atol=1e-10)
    (ours.log_prob(torch.tensor(x)).sum() + ours.entropy().sum()).backward()
    (theirs.log_prob(peer.tensor(x)).sum() + theirs.entropy().sum()).backward()
    for a, b in zip(ours_params, peer_params):
        _close(a.grad, b.grad, atol=1e-8)
    torch.manual_seed(0)
    draws = ours.rsample((20000,))
    assert draws.shape == (20000, 2, 4)
    assert np.allclose(np.cov(draws[:, 0].detach().numpy().T), theirs.covariance_matrix[0].detach().numpy(),
                       atol=0.15)
