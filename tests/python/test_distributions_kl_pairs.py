"""Every KL pair PyTorch registers between families trainrun has (same family and cross family, finite and
infinite) against PyTorch 1.13's kl_divergence on a batch of parameters, plus the errors: a Binomial with a larger
q.total_count, and a pair with no closed form."""
import math

import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.distributions as D  # noqa: E402


def params():
    """family -> (constructor arguments as lists, p and q differ)."""
    return {
        "Normal": ([[0.3, -1.0, 2.0], [1.0, 0.5, 2.5]], [[0.0, 0.5, 1.0], [2.0, 1.5, 0.7]]),
        "Laplace": ([[0.3, -1.0, 2.0], [1.0, 0.5, 2.5]], [[0.0, 0.5, 1.0], [2.0, 1.5, 0.7]]),
        "Gumbel": ([[0.3, -1.0, 2.0], [1.0, 0.5, 2.5]], [[0.0, 0.5, 1.0], [2.0, 1.5, 0.7]]),
        "Cauchy": ([[0.3, -1.0, 2.0], [1.0, 0.5, 2.5]], [[0.0, 0.5, 1.0], [2.0, 1.5, 0.7]]),
        "HalfNormal": ([[1.0, 0.5, 2.5]], [[2.0, 1.5, 0.7]]),
        "Exponential": ([[1.0, 0.5, 2.5]], [[2.0, 1.5, 0.7]]),
        "Gamma": ([[2.0, 0.7, 3.0], [1.0, 0.5, 2.5]], [[1.5, 2.5, 0.9], [2.0, 1.5, 0.7]]),
        "Beta": ([[2.0, 0.7, 3.0], [1.0, 0.5, 2.5]], [[1.5, 2.5, 0.9], [2.0, 1.5, 0.7]]),
        "Pareto": ([[1.0, 2.0, 0.5], [3.5, 2.5, 1.5]], [[0.8, 1.0, 0.7], [2.0, 3.0, 4.0]]),
        "Uniform": ([[0.1, 0.2, 0.3], [0.6, 0.9, 0.5]], [[0.0, -1.0, 0.2], [1.0, 2.0, 0.9]]),
        "Geometric": ([[0.3, 0.6, 0.9]], [[0.5, 0.2, 0.7]]),
        "Bernoulli": ([[0.3, 0.6, 0.9]], [[0.5, 0.2, 0.7]]),
        "Poisson": ([[1.3, 0.6, 4.0]], [[0.5, 2.2, 3.0]]),
        "Binomial": ([[5.0, 5.0, 5.0], [0.3, 0.6, 0.9]], [[5.0, 5.0, 5.0], [0.5, 0.2, 0.7]]),
        "OneHotCategorical": ([[[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]], [[[0.1, 0.1, 0.8], [0.3, 0.3, 0.4]]]),
    }


PAIRS = ["Binomial,Binomial", "Cauchy,Cauchy", "Geometric,Geometric", "Gumbel,Gumbel", "HalfNormal,HalfNormal",
         "Laplace,Laplace", "OneHotCategorical,OneHotCategorical", "Pareto,Pareto", "Bernoulli,Poisson",
         "Poisson,Bernoulli", "Beta,Exponential", "Beta,Gamma", "Beta,Normal", "Beta,Uniform", "Beta,Pareto",
         "Exponential,Gamma", "Exponential,Gumbel", "Exponential,Normal", "Exponential,Beta", "Exponential,Uniform",
         "Exponential,Pareto", "Gamma,Exponential", "Gamma,Gumbel", "Gamma,Normal", "Gamma,Uniform", "Gamma,Beta",
         "Gumbel,Normal", "Gumbel,Exponential", "Laplace,Normal", "Laplace,Gamma", "Normal,Gumbel",
         "Normal,Laplace", "Normal,Exponential", "Normal,Uniform", "Pareto,Exponential", "Pareto,Gamma",
         "Pareto,Normal", "Pareto,Uniform", "Uniform,Beta", "Uniform,Exponential", "Uniform,Gamma",
         "Uniform,Gumbel", "Uniform,Normal", "Uniform,Pareto"]


@pytest.mark.parametrize("pair", PAIRS)
def test_kl_matches_pytorch(pair):
    ref = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")
    p_name, q_name = pair.split(",")
    p_args, q_args = params()[p_name][0], params()[q_name][1]

    def make(module, name, args):
        return getattr(module.distributions, name)(*[module.tensor(a, dtype=module.float64) for a in args])
    ours = D.kl_divergence(make(torch, p_name, p_args), make(torch, q_name, q_args))
    theirs = ref.distributions.kl_divergence(make(ref, p_name, p_args), make(ref, q_name, q_args))
    a, b = np.array(ours.tolist()), theirs.numpy()
    assert a.shape == b.shape
    assert np.array_equal(np.isinf(a), np.isinf(b)), (a, b)
    finite = np.isfinite(b)
    assert np.allclose(a[finite], b[finite], rtol=1e-9, atol=1e-12), (a, b)


def test_low_rank_and_full_normals():
    ref = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")
    loc, factor, diag = [0.1, -0.2, 0.3], [[1.0, 0.2], [0.3, -0.5], [0.0, 0.4]], [0.5, 1.0, 1.5]
    loc2, factor2, diag2 = [0.0, 0.4, -0.1], [[0.3, 0.1], [0.0, 0.6], [-0.2, 0.2]], [1.2, 0.8, 0.6]
    cov = [[2.0, 0.3, 0.1], [0.3, 1.5, -0.2], [0.1, -0.2, 1.0]]

    def build(m):
        t = lambda v: m.tensor(v, dtype=m.float64)  # noqa: E731
        lr1 = m.distributions.LowRankMultivariateNormal(t(loc), t(factor), t(diag))
        lr2 = m.distributions.LowRankMultivariateNormal(t(loc2), t(factor2), t(diag2))
        full = m.distributions.MultivariateNormal(t(loc2), covariance_matrix=t(cov))
        kl = m.distributions.kl_divergence
        return [kl(lr1, lr2).item(), kl(lr1, full).item(), kl(full, lr1).item()]
    assert np.allclose(build(torch), build(ref), rtol=1e-10)


def test_errors():
    p = D.Binomial(torch.tensor([3.0]), torch.tensor([0.5]))
    q = D.Binomial(torch.tensor([5.0]), torch.tensor([0.5]))
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        D.kl_divergence(p, q)
    assert math.isinf(D.kl_divergence(q, p).item())
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.StudentT(torch.tensor(3.0)), D.Cauchy(torch.tensor(0.0), torch.tensor(1.0)))
