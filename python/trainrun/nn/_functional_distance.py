"""The distances of torch.nn.functional: cosine_similarity, pairwise_distance (rows of two tensors) and pdist
(all pairs of rows of one)."""
import numpy as np

from trainrun import _C
from trainrun._op_table import op
from trainrun.nn._functional_layers import _index


@op(function=False, functional=True)
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    n1 = _C.clamp(_C.norm(x1, 2.0, [dim], False), eps, None)
    n2 = _C.clamp(_C.norm(x2, 2.0, [dim], False), eps, None)
    return (x1 * x2).sum(dim=dim) / (n1 * n2)


@op(function=False, functional=True)
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return _C.norm(x1 - x2 + eps, float(p), [-1], keepdim)


@op(function=True, functional=True)
def pdist(input, p=2.0):  # noqa: A002
    """The p-norm distances between the rows of input (N, M): the upper triangle of cdist, row by row."""
    if input.ndim != 2:
        raise ValueError(f"pdist(): expected a 2-D input, got {input.ndim}-D")
    n = input.shape[0]
    rows, cols = np.triu_indices(n, 1)
    diff = input.index_select(0, _index(rows, input.device)) - input.index_select(0, _index(cols, input.device))
    return _C.norm(diff, float(p), [1], False)
