"""The probs/logits pair of the two-outcome families (Bernoulli, ContinuousBernoulli, Geometric, NegativeBinomial,
RelaxedBernoulli): given one, the other, as PyTorch's distributions.utils does (probs clamped away from 0 and 1
for the logits)."""
import trainrun
from trainrun.distributions.distribution import broadcast_all


def probs_and_logits(probs, logits, *others):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    if probs is not None:
        probs, *others = broadcast_all(probs, *others)
        eps = trainrun.finfo(probs.dtype).eps
        clamped = probs.clamp(min=eps, max=1 - eps)
        return (probs, clamped.log() - (-clamped).log1p(), *others)
    logits, *others = broadcast_all(logits, *others)
    return (logits.sigmoid(), logits, *others)
