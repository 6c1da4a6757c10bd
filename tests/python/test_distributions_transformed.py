"""TransformedDistribution and its transforms (SAC's tanh-squashed Gaussian, log-normal by Affine then Exp,
logit-normal, Compose and .inv), OneHotCategorical and Binomial against PyTorch 1.13: log_prob (and its
gradient), moments, entropy, enumerate_support; Binomial draws average n p; a cached tanh sample's log_prob uses
its pre-image."""
import numpy as np

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402


def _run(t):
    D, T = t.distributions, t.distributions.transforms
    mu = t.tensor([0.3, -0.5], requires_grad=True)
    squashed = D.TransformedDistribution(D.Normal(mu, t.tensor([0.8, 1.2])), [T.TanhTransform(cache_size=1)])
    log_prob = squashed.log_prob(t.tensor([0.2, -0.7]))
    log_prob.sum().backward()
    one_hot = D.OneHotCategorical(probs=t.tensor([0.2, 0.3, 0.5]))
    binomial = D.Binomial(10, probs=t.tensor([0.3, 0.6]))
    return {
        "tanh normal log_prob": log_prob, "its gradient": mu.grad,
        "affine then exp": D.TransformedDistribution(D.Normal(0., 1.), [T.AffineTransform(1.0, 2.0), T.ExpTransform()]
                                                     ).log_prob(t.tensor([0.5, 3.0])),
        "logit normal": D.TransformedDistribution(D.Normal(t.zeros(2), 1.), [T.SigmoidTransform()]).log_prob(
            t.tensor([0.2, 0.9])),
        "compose inverse": T.ComposeTransform([T.AffineTransform(0., 3.), T.TanhTransform()]).inv(t.tensor([0.5])),
        "power log det": T.PowerTransform(2.0).log_abs_det_jacobian(t.tensor([1.5]), t.tensor([2.25])),
        "one-hot log_prob": one_hot.log_prob(t.tensor([0., 0., 1.])), "one-hot entropy": one_hot.entropy(),
        "one-hot variance": one_hot.variance, "one-hot mode": one_hot.mode,
        "one-hot support": one_hot.enumerate_support(),
        "binomial log_prob": binomial.log_prob(t.tensor([3., 7.])), "binomial entropy": binomial.entropy(),
        "binomial mean": binomial.mean, "binomial variance": binomial.variance, "binomial mode": binomial.mode,
        "binomial from logits": D.Binomial(t.tensor([5., 8.]), logits=t.tensor([-0.4, 1.2])).log_prob(
            t.tensor([2., 8.])),
        "binomial support": D.Binomial(4, probs=t.tensor(0.5)).enumerate_support(),
    }


@needs_torch
def test_transformed_one_hot_and_binomial_match_pytorch():
    ours, theirs = _run(torch), _run(peer)
    for name in ours:
        a, b = np.array(ours[name].detach().tolist()), np.array(theirs[name].detach().tolist())
        assert a.shape == b.shape and np.allclose(a, b, atol=1e-4), name


def test_samples_and_the_tanh_cache():
    D, T = torch.distributions, torch.distributions.transforms
    torch.manual_seed(0)
    draws = D.Binomial(10, probs=torch.tensor([0.3, 0.6])).sample((4000,))
    assert draws.shape == (4000, 2) and bool(((draws >= 0) & (draws <= 10)).all())
    assert torch.allclose(draws.mean(0), torch.tensor([3.0, 6.0]), atol=0.15)
    assert D.OneHotCategorical(logits=torch.zeros(3)).sample((5,)).sum(-1).tolist() == [1.0] * 5
    tanh = T.TanhTransform(cache_size=1)
    policy = D.TransformedDistribution(D.Normal(torch.tensor([6.0]), torch.tensor([1.0])), [tanh])
    action = policy.rsample()
    assert tanh.inv(action) is tanh._cached[0]  # log_prob of the sample inverts nothing (tanh near 1)
    assert bool(torch.isfinite(policy.log_prob(action)).all())
