"""torch.distributions.VonMises(loc, concentration): the circular normal distribution on [-pi, pi), density
exp(k cos(x - loc)) / (2 pi I0(k)). Draws by Best and Fisher's rejection sampler (1979), every element redrawn
until accepted."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all


def _log_modified_bessel(x, order):
    """log I_order(x) for order 0 or 1, through the exponentially scaled functions (no overflow)."""
    scaled = trainrun.special.i0e(x) if order == 0 else trainrun.special.i1e(x)
    return scaled.log() + x.abs()


class VonMises(Distribution):
    arg_constraints = {"loc": "real", "concentration": "positive"}
    support = "real"
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, Size(), validate_args)
        self._check_parameter("concentration", self.concentration > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        """The circular variance 1 - I1(k) / I0(k)."""
        k = self.concentration
        return 1 - (_log_modified_bessel(k, 1) - _log_modified_bessel(k, 0)).exp()

    def log_prob(self, value):
        self._check_sample(value)
        return (self.concentration * trainrun.cos(value - self.loc) - math.log(2 * math.pi)
                - _log_modified_bessel(self.concentration, 0))

    def _proposal_r(self):
        k = self.concentration.double()
        tau = 1 + (1 + 4 * k.pow(2)).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * k)
        return trainrun.where(k < 1e-5, 1 / k + k, (1 + rho.pow(2)) / (2 * rho))

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with trainrun.no_grad():
            k = self.concentration.double().expand(list(shape))
            r = self._proposal_r().expand(list(shape))
            x = trainrun.zeros(list(shape), dtype=trainrun.float64)
            done = trainrun.zeros(list(shape), dtype=trainrun.bool)
            for _ in range(1000):  # (each round accepts most of what is left: a few rounds in practice)
                u1, u2, u3 = (trainrun.rand(list(shape), dtype=trainrun.float64) for _ in range(3))
                z = trainrun.cos(math.pi * u1)
                f = (1 + r * z) / (r + z)
                c = k * (r - f)
                accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
                new = accept & ~done
                x = trainrun.where(new, trainrun.sign(u3 - 0.5) * trainrun.acos(f.clamp(-1.0, 1.0)), x)
                done = done | accept
                if bool(done.all()):
                    break
            result = (x + math.pi + self.loc.double()).remainder(2 * math.pi) - math.pi
            return result.to(self.loc.dtype)
