"""torch.nn.utils.parametrizations: weight_norm and spectral_norm as parametrizations (parametrize.py).

weight_norm(module) keeps the weight as magnitude `original0` (g, its norm over every dim but `dim`) and
direction `original1` (v): weight = g * v / ||v||. spectral_norm(module) divides the weight by its largest
singular value, estimated by power iteration on the buffers _u and _v (one step per training forward)."""
import trainrun
from trainrun import _C
from trainrun._autograd import no_grad
from trainrun.nn import functional as F
from trainrun.nn._module import Module
from trainrun.nn.utils import parametrize


def _norm_except_dim(v, dim):
    """The 2-norm of v over every dim but `dim`, shaped to broadcast against v (dim -1: over all of v)."""
    if dim == -1:
        return v.norm()
    dims = [d for d in range(v.ndim) if d != dim]
    return (v * v).sum(dim=dims, keepdim=True).sqrt()


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """module.name = g * v / ||v|| with g and v the parameters parametrizations.name.original0/original1."""
    if dim is not None and dim < -1:
        dim += getattr(module, name).ndim
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got "
                             f"{dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations="
                             f"{n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        self.n_power_iterations = n_power_iterations
        if ndim > 1:
            with no_grad():
                matrix = self._as_matrix(weight)
                h, w = matrix.shape
                self.register_buffer("_u", F.normalize(_C.randn([h], dtype=weight.dtype), dim=0, eps=eps))
                self.register_buffer("_v", F.normalize(_C.randn([w], dtype=weight.dtype), dim=0, eps=eps))
                self._power_method(matrix, 15)

    def _as_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, matrix, iterations):
        with no_grad():
            for _ in range(iterations):
                self._u.copy_(F.normalize(trainrun.mv(matrix, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(trainrun.mv(matrix.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        matrix = self._as_matrix(weight)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * trainrun.mv(matrix, v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.name divided by its spectral norm (largest singular value), by power iteration."""
    weight = getattr(module, name, None)
    if not hasattr(weight, "shape"):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if parametrize.type_before_parametrizations(module).__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
