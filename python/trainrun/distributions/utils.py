"""torch.distributions.utils: the helpers distribution code imports (probs/logits conversions, broadcast_all,
lazy_property, the tril <-> vector maps)."""
import functools

import trainrun
from trainrun.distributions.distribution import broadcast_all  # noqa: F401

euler_constant = 0.57721566490153286060


def clamp_probs(probs):
    """probs kept inside (0, 1) by the dtype's eps."""
    eps = trainrun.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Logits of probabilities: log(p) - log(1 - p) for a Bernoulli (is_binary), log(p) for a categorical."""
    clamped = clamp_probs(probs)
    return clamped.log() - (-clamped).log1p() if is_binary else clamped.log()


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else trainrun.softmax(logits, -1)


class lazy_property:  # noqa: N801  (PyTorch's name)
    """A property computed once, on first access, then stored on the instance."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with trainrun.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def tril_matrix_to_vec(mat, diag=0):
    """The lower triangle (below diagonal diag) of the last two dims, row by row, as a vector."""
    n = mat.shape[-1]
    rows, cols = zip(*[(i, j) for i in range(n) for j in range(n) if j - i <= diag])
    index = trainrun.tensor([i * n + j for i, j in zip(rows, cols)])
    return mat.reshape(list(mat.shape[:-2]) + [n * n])[..., index]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of tril_matrix_to_vec: a square matrix with the vector in its lower triangle."""
    length = vec.shape[-1]
    n, positions = 0, []
    while len(positions) < length:  # the smallest square whose triangle holds length elements
        n += 1
        positions = [i * n + j for i in range(n) for j in range(n) if j - i <= diag]
    if len(positions) != length:
        raise ValueError(f"vec_to_tril_matrix: {length} elements do not fill a triangle with diag={diag}")
    flat = trainrun.zeros(list(vec.shape[:-1]) + [n * n], dtype=vec.dtype)
    index = trainrun.tensor(positions).expand(list(vec.shape[:-1]) + [length])
    return flat.scatter(-1, index, vec).reshape(list(vec.shape[:-1]) + [n, n])
