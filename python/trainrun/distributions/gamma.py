"""torch.distributions.Gamma(concentration, rate), and the standard-gamma draws Beta and Dirichlet build on
(Marsaglia and Tsang's method, vectorized: each round redraws the rejected elements). Draws carry no gradient
to the parameters here (rsample raises): the implicit-reparameterization gradient is not implemented."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all
from trainrun.distributions.exp_family import ExponentialFamily


def standard_gamma(concentration, shape):
    """Gamma(concentration, 1) draws of `shape` (concentration broadcast to it), by Marsaglia-Tsang."""
    with trainrun.no_grad():
        a = concentration.detach().expand(list(shape)).to(trainrun.float64)
        boost = a < 1  # Gamma(a) = Gamma(a + 1) * U^(1/a)
        d = trainrun.where(boost, a + 1, a) - 1.0 / 3
        c = 1.0 / trainrun.sqrt(9 * d)
        out = trainrun.zeros_like(a)
        pending = trainrun.ones_like(a, dtype=trainrun.bool)
        for _ in range(200):  # each round accepts > 95% of what is pending
            x = trainrun.randn(*shape, dtype=trainrun.float64, device=a.device)
            v = (1 + c * x) ** 3
            u = trainrun.rand(*shape, dtype=trainrun.float64, device=a.device)
            ok = (v > 0) & (trainrun.log(u) < 0.5 * x * x + d - d * v + d * trainrun.log(v.clamp(min=1e-300)))
            take = pending & ok
            out = trainrun.where(take, d * v, out)
            pending = pending & ~ok
            if not bool(pending.any()):
                break
        if bool(pending.any()):
            raise RuntimeError("standard_gamma: rejection sampling did not finish (concentration out of range?)")
        u = trainrun.rand(*shape, dtype=trainrun.float64, device=a.device)
        out = trainrun.where(boost, out * u.pow(1.0 / a), out)
        tiny = trainrun.finfo(concentration.dtype).tiny
        return out.clamp(min=tiny).to(concentration.dtype)


class Gamma(ExponentialFamily):
    # The exponential-family form (exp_family.py): natural parameters, log normalizer, E[k(x)].
    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return trainrun.lgamma(x + 1) + (x + 1) * trainrun.log(-y.reciprocal())

    _mean_carrier_measure = 0

    arg_constraints = {"concentration": "positive", "rate": "positive"}
    support = "nonnegative"

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, Size(), validate_args)
        self._check_parameter("concentration", self.concentration > 0, "GreaterThan(lower_bound=0.0)")
        self._check_parameter("rate", self.rate > 0, "GreaterThan(lower_bound=0.0)")

    def _support_ok(self, value):
        return value >= 0

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        return standard_gamma(self.concentration, shape) / self.rate.detach()

    def rsample(self, sample_shape=Size()):
        raise NotImplementedError("Gamma.rsample: gradients through gamma draws (implicit reparameterization) are "
                                  "not supported in trainrun; use sample()")

    def log_prob(self, value):
        self._check_sample(value)
        a, b = self.concentration, self.rate
        return trainrun.xlogy(a, b) + trainrun.xlogy(a - 1, value) - b * value - trainrun.lgamma(a)

    def cdf(self, value):
        raise NotImplementedError("Gamma.cdf needs the incomplete gamma function, which trainrun lacks")

    def entropy(self):
        a = self.concentration
        return a - trainrun.log(self.rate) + trainrun.lgamma(a) + (1.0 - a) * trainrun.digamma(a)
