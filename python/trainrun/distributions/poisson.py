"""torch.distributions.Poisson(rate): counts, drawn exactly (NumPy's sampler, seeded from trainrun's
generator so trainrun.manual_seed makes the draws repeat)."""
import numpy as np

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all
from trainrun.distributions.exp_family import ExponentialFamily


class Poisson(ExponentialFamily):
    # The exponential-family form (exp_family.py): natural parameters and log normalizer (its entropy is its own).
    @property
    def _natural_params(self):
        return (trainrun.log(self.rate),)

    def _log_normalizer(self, x):
        return trainrun.exp(x)

    arg_constraints = {"rate": "nonnegative"}
    support = "nonnegative_integer"

    def __init__(self, rate, validate_args=None):
        self.rate, = broadcast_all(rate)
        super().__init__(self.rate.shape, Size(), validate_args)
        self._check_parameter("rate", self.rate >= 0, "GreaterThanEq(lower_bound=0.0)")

    def _support_ok(self, value):
        return (value >= 0) & (value == value.floor())

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=Size()):
        shape = list(self._extended_shape(sample_shape))
        seed = int(trainrun.randint(0, 2 ** 31 - 1, (1,)).item())
        rates = np.broadcast_to(np.asarray(self.rate.detach().to("cpu").double().tolist(), dtype=np.float64), shape)
        counts = np.asarray(np.random.default_rng(seed).poisson(rates), dtype=np.float64)  # (a 0-d draw is an int)
        return trainrun.tensor(counts.tolist(), dtype=self.rate.dtype).reshape(shape).to(self.rate.device)

    def log_prob(self, value):
        self._check_sample(value)
        return trainrun.xlogy(value, self.rate) - self.rate - trainrun.lgamma(value + 1)
