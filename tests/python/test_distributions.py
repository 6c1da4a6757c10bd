"""trainrun.distributions against PyTorch 1.13's torch.distributions: log_prob, entropy, moments, cdf/icdf and
kl_divergence on the same parameters; batch and event shapes of samples; rsample's gradients reach the parameters
(a Normal's: d/dloc of the mean draw is 1); sample means near the distribution's mean; arguments and values
validated by default as PyTorch validates them, with its messages."""
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402

D = torch.distributions


def _ours(t):
    return torch.tensor(t.tolist())


def _close(ours, theirs, atol=1e-5):
    return torch.allclose(ours, _ours(theirs), atol=atol, equal_nan=True)


@needs_torch
def test_values_match_pytorch():
    peer.manual_seed(0)
    loc, scale = peer.randn(2, 3), peer.rand(2, 3) + 0.5
    x = peer.randn(2, 3)
    ours, theirs = D.Normal(_ours(loc), _ours(scale)), peer.distributions.Normal(loc, scale)
    for name in ("log_prob", "cdf"):
        assert _close(getattr(ours, name)(_ours(x)), getattr(theirs, name)(x)), name
    probs = peer.rand(2, 3)
    assert _close(ours.icdf(_ours(probs)), theirs.icdf(probs), atol=1e-4)
    assert _close(ours.entropy(), theirs.entropy()) and _close(ours.variance, theirs.variance)

    logits = peer.randn(4, 5)
    cat, peer_cat = D.Categorical(logits=_ours(logits)), peer.distributions.Categorical(logits=logits)
    idx = peer.tensor([0, 4, 2, 1])
    assert _close(cat.log_prob(_ours(idx).long()), peer_cat.log_prob(idx)) and _close(cat.entropy(), peer_cat.entropy())
    assert _close(D.Categorical(probs=_ours(logits.softmax(-1))).probs, peer_cat.probs)

    p = peer.rand(3) * 0.9 + 0.05
    bern, peer_bern = D.Bernoulli(probs=_ours(p)), peer.distributions.Bernoulli(probs=p)
    v = peer.tensor([1.0, 0.0, 1.0])
    assert _close(bern.log_prob(_ours(v)), peer_bern.log_prob(v)) and _close(bern.entropy(), peer_bern.entropy())
    assert _close(D.Bernoulli(logits=_ours(logits[0, :3])).probs, peer.distributions.Bernoulli(
        logits=logits[0, :3]).probs)

    low, high = peer.zeros(3), peer.tensor([1.0, 2.0, 4.0])
    uni, peer_uni = D.Uniform(_ours(low), _ours(high)), peer.distributions.Uniform(low, high)
    u = peer.tensor([0.5, 1.5, 3.0])
    assert _close(uni.log_prob(_ours(u)), peer_uni.log_prob(u)) and _close(uni.entropy(), peer_uni.entropy())

    ind = D.Independent(D.Normal(_ours(loc), _ours(scale)), 1)
    peer_ind = peer.distributions.Independent(theirs, 1)
    assert (ind.batch_shape, ind.event_shape) == (torch.Size([2]), torch.Size([3]))
    assert _close(ind.log_prob(_ours(x)), peer_ind.log_prob(x)) and _close(ind.entropy(), peer_ind.entropy())

    pairs = [(ours, D.Normal(_ours(x), _ours(scale * 2)), theirs, peer.distributions.Normal(x, scale * 2)),
             (cat, D.Categorical(logits=_ours(logits.flip(-1))), peer_cat,
              peer.distributions.Categorical(logits=logits.flip(-1))),
             (bern, D.Bernoulli(probs=_ours(p.flip(0))), peer_bern, peer.distributions.Bernoulli(probs=p.flip(0))),
             (uni, D.Uniform(_ours(low) - 1, _ours(high) + 1), peer_uni,
              peer.distributions.Uniform(low - 1, high + 1)),
             (ind, D.Independent(D.Normal(_ours(x), _ours(scale)), 1), peer_ind,
              peer.distributions.Independent(peer.distributions.Normal(x, scale), 1))]
    for a, b, pa, pb in pairs:
        assert _close(D.kl_divergence(a, b), peer.distributions.kl_divergence(pa, pb)), type(a).__name__


def test_sample_shapes_and_statistics():
    torch.manual_seed(0)
    normal = D.Normal(torch.tensor([1.0, -2.0]), torch.tensor([0.5, 2.0]))
    assert normal.sample().shape == (2,) and normal.sample((1000, 3)).shape == (1000, 3, 2)
    draws = normal.sample((20000,))
    assert torch.allclose(draws.mean(0), normal.mean, atol=0.06) and torch.allclose(draws.std(0), normal.stddev,
                                                                                     atol=0.06)
    cat = D.Categorical(probs=torch.tensor([[0.1, 0.9], [0.8, 0.2]]))
    draws = cat.sample((5000,))
    assert draws.shape == (5000, 2) and draws.dtype == torch.int64
    assert abs(draws[:, 0].float().mean().item() - 0.9) < 0.03 and abs(draws[:, 1].float().mean().item() - 0.2) < 0.03
    bern = D.Bernoulli(probs=torch.tensor([0.25]))
    assert abs(bern.sample((8000,)).mean().item() - 0.25) < 0.03
    uni = D.Uniform(-1.0, 3.0).sample((5000,))
    assert uni.min().item() >= -1.0 and uni.max().item() < 3.0 and abs(uni.mean().item() - 1.0) < 0.1


def test_rsample_passes_gradients_and_sample_does_not():
    loc = torch.zeros(3, requires_grad=True)
    scale = torch.ones(3, requires_grad=True)
    normal = D.Normal(loc, scale)
    normal.rsample((50,)).mean(0).sum().backward()
    assert torch.allclose(loc.grad, torch.ones(3)) and scale.grad is not None
    assert not normal.sample().requires_grad
    logits = torch.zeros(4, requires_grad=True)
    D.Categorical(logits=logits).log_prob(torch.tensor(2)).backward()  # a policy gradient's term
    assert torch.allclose(logits.grad, torch.tensor([-0.25, -0.25, 0.75, -0.25]))


def test_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        D.Categorical()
    with pytest.raises(ValueError, match="Expected parameter scale"):
        D.Normal(torch.zeros(2), torch.tensor([1.0, -1.0]), validate_args=True)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(torch.tensor([0.5, 0.5])))
    # (Normal || Uniform is registered, as PyTorch's: infinite, the uniform being zero outside its interval)
    assert D.kl_divergence(D.Normal(0.0, 1.0), D.Uniform(0.0, 1.0)).item() == float("inf")
    with pytest.raises(NotImplementedError, match="rsample"):
        D.Categorical(logits=torch.zeros(2)).rsample()
    with pytest.raises(ValueError, match="to be within the support"):
        D.Uniform(0.0, 1.0).log_prob(torch.tensor(1.5))
    with pytest.raises(ValueError, match="to be within the support"):
        D.Categorical(logits=torch.zeros(3)).log_prob(torch.tensor(3))
    with pytest.raises(ValueError, match="Expected parameter probs"):
        D.Bernoulli(probs=torch.tensor([1.5]))
    assert D.Uniform(0.0, 1.0, validate_args=False).log_prob(torch.tensor(1.5)).item() == float("-inf")


def _families(lib, tensor):
    return {
        "Exponential": (lib.Exponential(tensor([0.5, 2.0])), [0.3, 1.2]),
        "Laplace": (lib.Laplace(tensor([0.0, 1.0]), tensor([1.0, 0.5])), [0.3, -1.2]),
        "Gamma": (lib.Gamma(tensor([0.5, 3.0]), tensor([1.0, 2.0])), [0.3, 1.2]),
        "Beta": (lib.Beta(tensor([0.5, 3.0]), tensor([2.0, 1.5])), [0.3, 0.8]),
        "Dirichlet": (lib.Dirichlet(tensor([[0.5, 3.0, 1.0], [2.0, 2.0, 2.0]])), [[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]),
        "Poisson": (lib.Poisson(tensor([0.5, 3.0])), [2.0, 0.0]),
        "LogNormal": (lib.LogNormal(tensor([0.0, 1.0]), tensor([1.0, 0.5])), [0.3, 1.2]),
        "MultivariateNormal": (lib.MultivariateNormal(tensor([0.0, 1.0]), scale_tril=tensor([[1.0, 0.0], [0.5, 2.0]])),
                               [0.3, -1.2]),
        "MultivariateNormal covariance": (lib.MultivariateNormal(tensor([0.0, 1.0]), covariance_matrix=tensor(
            [[2.0, 0.3], [0.3, 1.0]])), [0.3, -1.2]),
    }


@needs_torch
def test_more_families_match_pytorch():
    ours, theirs = _families(D, torch.tensor), _families(peer.distributions, peer.tensor)
    for name, (mine, value) in ours.items():
        other = theirs[name][0]
        assert _close(mine.log_prob(torch.tensor(value)), other.log_prob(peer.tensor(value)), 1e-4), name
        assert _close(mine.mean, other.mean, 1e-5) and _close(mine.variance, other.variance, 1e-4), name
        if name != "Poisson":
            assert _close(mine.entropy(), other.entropy(), 1e-4), name
        assert mine.batch_shape == other.batch_shape and mine.event_shape == other.event_shape, name
    pairs = {"Gamma": (D.Gamma(torch.tensor([0.5, 3.0]), torch.tensor([1.0, 2.0])),
                       D.Gamma(torch.tensor([1.5, 1.0]), torch.tensor([0.3, 2.0]))),
             "Beta": (D.Beta(torch.tensor([0.5, 3.0]), torch.tensor([2.0, 1.5])),
                      D.Beta(torch.tensor([1.5, 1.0]), torch.tensor([0.3, 2.0]))),
             "Dirichlet": (D.Dirichlet(torch.tensor([0.5, 3.0, 1.0])), D.Dirichlet(torch.tensor([1.5, 1.0, 2.0]))),
             "Exponential": (D.Exponential(torch.tensor([0.5])), D.Exponential(torch.tensor([2.0]))),
             "Poisson": (D.Poisson(torch.tensor([0.5])), D.Poisson(torch.tensor([2.0]))),
             "MultivariateNormal": (D.MultivariateNormal(torch.tensor([0.0, 1.0]), scale_tril=torch.tensor(
                 [[1.0, 0.0], [0.5, 2.0]])), D.MultivariateNormal(torch.tensor([1.0, 0.0]), scale_tril=torch.tensor(
                     [[2.0, 0.0], [-0.5, 1.0]])))}
    for name, (p, q) in pairs.items():
        theirs_p = {"Gamma": lambda d: peer.distributions.Gamma(_peer(d.concentration), _peer(d.rate)),
                    "Beta": lambda d: peer.distributions.Beta(_peer(d.concentration1), _peer(d.concentration0)),
                    "Dirichlet": lambda d: peer.distributions.Dirichlet(_peer(d.concentration)),
                    "Exponential": lambda d: peer.distributions.Exponential(_peer(d.rate)),
                    "Poisson": lambda d: peer.distributions.Poisson(_peer(d.rate)),
                    "MultivariateNormal": lambda d: peer.distributions.MultivariateNormal(
                        _peer(d.loc), scale_tril=_peer(d.scale_tril))}[name]
        want = peer.distributions.kl_divergence(theirs_p(p), theirs_p(q))
        assert _close(D.kl_divergence(p, q), want, 1e-4), name


def _peer(t):
    return peer.tensor(t.tolist())


def test_more_families_sample_their_distribution():
    torch.manual_seed(0)
    n = 20000
    for dist in (D.Gamma(torch.tensor([0.3, 4.0]), torch.tensor([2.0, 0.5])),
                 D.Beta(torch.tensor([0.5, 3.0]), torch.tensor([2.0, 1.5])),
                 D.Dirichlet(torch.tensor([0.5, 3.0, 1.0])), D.Poisson(torch.tensor([0.5, 7.0])),
                 D.Exponential(torch.tensor([3.0])), D.Laplace(torch.tensor([1.0]), torch.tensor([2.0])),
                 D.LogNormal(torch.tensor([0.0]), torch.tensor([0.5])),
                 D.MultivariateNormal(torch.tensor([0.0, 1.0]), scale_tril=torch.tensor([[1.0, 0.0], [0.5, 2.0]]))):
        draws = dist.sample((n,))
        assert tuple(draws.shape) == (n,) + tuple(dist.batch_shape) + tuple(dist.event_shape)
        sem = (dist.variance / n).sqrt()
        assert bool(((draws.mean(0) - dist.mean).abs() < 5 * sem).all()), (type(dist).__name__, draws.mean(0))
        assert bool(((draws.var(0) / dist.variance - 1).abs() < 0.1).all()), (type(dist).__name__, draws.var(0))
    torch.manual_seed(3)
    first = D.Poisson(torch.tensor([2.0])).sample((5,))
    torch.manual_seed(3)
    assert torch.equal(first, D.Poisson(torch.tensor([2.0])).sample((5,)))  # the seed decides the counts
    # A covariance or precision matrix that requires grad: gradients through the Cholesky factor (and the inverse).
    root = torch.tensor([[1.2, 0.0], [0.3, 0.9]], dtype=torch.float64, requires_grad=True)
    x = torch.tensor([[0.5, -1.0], [2.0, 0.1]], dtype=torch.float64)
    for kind in ("covariance_matrix", "precision_matrix"):
        assert torch.autograd.gradcheck(lambda r: D.MultivariateNormal(
            torch.zeros(2, dtype=torch.float64), **{kind: r @ r.t() + torch.eye(2, dtype=torch.float64)}).log_prob(
            x).sum(), (root,))
    tril = torch.tensor([[1.0, 0.0], [0.5, 2.0]], requires_grad=True)
    D.MultivariateNormal(torch.zeros(2), scale_tril=tril).rsample((4,)).sum().backward()
    assert tril.grad is not None
