"""torch.distributions.Gamma(concentration, rate), and the standard-gamma draws Beta and Dirichlet build on
(Marsaglia and Tsang's method, vectorized: each round redraws the rejected elements). rsample differentiates
the draws with respect to the concentration by implicit reparameterization, as PyTorch's does: a draw x of
Gamma(a, 1) moves with a along its CDF's level set, dx/da = -(dF/da) / (dF/dx), F(a, x) the regularized lower
incomplete gamma function (dF/dx is its density; dF/da a central difference of F in float64)."""
import trainrun
from trainrun import Size
from trainrun.autograd import Function
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
            x = trainrun.randn(tuple(shape), dtype=trainrun.float64, device=a.device)
            v = (1 + c * x) ** 3
            u = trainrun.rand(tuple(shape), dtype=trainrun.float64, device=a.device)
            ok = (v > 0) & (trainrun.log(u) < 0.5 * x * x + d - d * v + d * trainrun.log(v.clamp(min=1e-300)))
            take = pending & ok
            out = trainrun.where(take, d * v, out)
            pending = pending & ~ok
            if not bool(pending.any()):
                break
        if bool(pending.any()):
            raise RuntimeError("standard_gamma: rejection sampling did not finish (concentration out of range?)")
        u = trainrun.rand(tuple(shape), dtype=trainrun.float64, device=a.device)
        out = trainrun.where(boost, out * u.pow(1.0 / a), out)
        tiny = trainrun.finfo(concentration.dtype).tiny
        return out.clamp(min=tiny).to(concentration.dtype)


def standard_gamma_grad(x, concentration):
    """dx/da for draws x of Gamma(a, 1) (PyTorch's torch._standard_gamma_grad), in float64."""
    with trainrun.no_grad():
        a = concentration.to(trainrun.float64)
        x = x.to(trainrun.float64).clamp(min=1e-300)
        h = 1e-5 * a.clamp(min=1.0)
        lower = (a - h).clamp(min=1e-12)  # (a one-sided step where a itself is tiny)
        dF_da = (trainrun.igamma(a + h, x) - trainrun.igamma(lower, x)) / (a + h - lower)  # noqa: N806
        log_density = (a - 1) * trainrun.log(x) - x - trainrun.lgamma(a)
        return -dF_da / trainrun.exp(log_density)


class _StandardGammaDraw(Function):
    """Gamma(concentration, 1) draws of `shape`, differentiable in the concentration (implicit gradient)."""

    @staticmethod
    def forward(ctx, concentration, shape):
        x = standard_gamma(concentration, shape)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    def backward(ctx, g):
        x, concentration = ctx.saved_tensors
        grad = g * standard_gamma_grad(x, concentration.expand(list(x.shape))).to(g.dtype)
        # (reduce over the dims the concentration was broadcast along to the draw's shape)
        lead = grad.dim() - concentration.dim()
        grad = grad.sum(dim=list(range(lead))) if lead else grad
        dims = [d for d, n in enumerate(concentration.shape) if n == 1 and grad.shape[d] != 1]
        return (grad.sum(dim=dims, keepdim=True) if dims else grad), None


def standard_gamma_rsample(concentration, shape):
    """standard_gamma's draws, carrying the implicit gradient to `concentration` when it requires grad."""
    if trainrun.is_grad_enabled() and concentration.requires_grad:
        return _StandardGammaDraw.apply(concentration, list(shape))
    return standard_gamma(concentration, shape)


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

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        """Draws differentiable in the concentration (implicit reparameterization) and the rate."""
        shape = self._extended_shape(sample_shape)
        return standard_gamma_rsample(self.concentration, shape) / self.rate

    def log_prob(self, value):
        self._check_sample(value)
        a, b = self.concentration, self.rate
        return trainrun.xlogy(a, b) + trainrun.xlogy(a - 1, value) - b * value - trainrun.lgamma(a)

    def cdf(self, value):
        self._check_sample(value)
        return trainrun.special.gammainc(self.concentration, self.rate * value)

    def entropy(self):
        a = self.concentration
        return a - trainrun.log(self.rate) + trainrun.lgamma(a) + (1.0 - a) * trainrun.digamma(a)
