"""ExponentialFamily, as torch.distributions.exp_family: the base of the families whose density is
exp(<t(x), theta> - F(theta) + k(x)) (Normal, Bernoulli, Beta, Dirichlet, Exponential, Gamma, Chi2, Poisson,
ContinuousBernoulli). A family gives its natural parameters theta (_natural_params), its log normalizer F
(_log_normalizer) and the mean carrier measure E[k(x)]; from those, the entropy is F(theta) - <theta, grad F> -
E[k(x)] by autograd (the families here keep their closed forms), and KL(p || q) within one family is the Bregman
divergence of F (kl.py registers it for two members of the same family)."""
import trainrun
from trainrun.distributions.distribution import Distribution


class ExponentialFamily(Distribution):
    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        """F(theta) - <theta, grad F(theta)> - E[k(x)] (the Bregman form; families override it in closed form)."""
        result = -self._mean_carrier_measure
        params = [p.detach().requires_grad_() for p in self._natural_params]
        with trainrun.enable_grad():
            log_normalizer = self._log_normalizer(*params)
            grads = trainrun.autograd.grad(log_normalizer.sum(), params, create_graph=True)
        result = result + log_normalizer
        for p, g in zip(params, grads):
            result = result - (p * g).reshape(list(self._batch_shape) + [-1]).sum(-1)
        return result
