"""trainrun.linalg: norms (differentiable compositions of core ops), and
inv, det and solve with their gradients; svd, svdvals, qr and slogdet
with theirs (_linalg_svd_qr.py); cross, matrix_power, matrix_exp, pinv and
lstsq composed of those (differentiable; pinv and lstsq for full-rank
inputs); the factorizations run on the host (NumPy's LAPACK); what has no
gradient says so when one is asked for."""
import numpy as np

import trainrun
from trainrun import _C
from trainrun.autograd import Function
from trainrun._linalg_decompositions import back as _back, host as _host, lapack as _lapack


def _dims(dim):
    return None if dim is None else ([dim] if isinstance(dim, int) else list(dim))


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """The ord-norm of x's elements (all of them, or along dim)."""
    if out is not None:
        raise NotImplementedError("linalg.vector_norm(out=...) is not supported")
    x = x.to(dtype) if dtype is not None else x
    if not x.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{str(x.dtype).rsplit('.', 1)[-1].capitalize()}")
    dims = _dims(dim)
    a = x.abs()
    reduce_all = dims is None
    if ord == float("inf"):
        return a.amax() if reduce_all and not keepdim else a.amax(dim=dims if dims else list(range(x.dim())),
                                                                 keepdim=keepdim)
    if ord == float("-inf"):
        return a.amin() if reduce_all and not keepdim else a.amin(dim=dims if dims else list(range(x.dim())),
                                                                 keepdim=keepdim)
    if ord == 0:
        return (a != 0).to(x.dtype).sum(dim=dims, keepdim=keepdim) if dims else (a != 0).to(x.dtype).sum()
    if ord == 2:
        s = (a * a).sum(dim=dims, keepdim=keepdim) if dims or keepdim else (a * a).sum()
        return s.sqrt()
    p = float(ord)
    s = a.pow(p).sum(dim=dims, keepdim=keepdim) if dims or keepdim else a.pow(p).sum()
    return s.pow(1.0 / p)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):  # noqa: N803
    """Frobenius ('fro'), nuclear ('nuc'), 1, -1, inf, -inf or 2/-2 (singular values) norms of matrices."""
    A = A.to(dtype) if dtype is not None else A
    d0, d1 = (d % A.dim() for d in dim)

    def squeezed(r):  # the two reduced dims dropped, the later one first
        return r if keepdim else r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    if ord == "fro":
        return vector_norm(A, 2, dim=[d0, d1], keepdim=keepdim)
    if ord in (1, -1):
        s = A.abs().sum(dim=d0, keepdim=True)
        return squeezed(s.amax(dim=d1, keepdim=True) if ord == 1 else s.amin(dim=d1, keepdim=True))
    if ord in (float("inf"), float("-inf")):
        s = A.abs().sum(dim=d1, keepdim=True)
        return squeezed(s.amax(dim=d0, keepdim=True) if ord > 0 else s.amin(dim=d0, keepdim=True))
    if ord in ("nuc", 2, -2):
        values = svdvals(A.movedim((d0, d1), (-2, -1)))
        r = values.sum(-1) if ord == "nuc" else (values.amax(-1) if ord == 2 else values.amin(-1))
        return r.unsqueeze(-1).unsqueeze(-1).movedim((-2, -1), (d0, d1)) if keepdim else r
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: N803
    """vector_norm for a vector or a dim, matrix_norm for a pair of dims; ord=None: 2-norm / Frobenius."""
    dims = _dims(dim)
    if (dims is not None and len(dims) == 2) or (dims is None and ord is not None and A.dim() == 2):
        return matrix_norm(A, "fro" if ord is None else ord, dims or (-2, -1), keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)


class _Inv(Function):
    @staticmethod
    def forward(ctx, A):  # noqa: N803
        out = _back(_lapack("inv", np.linalg.inv, _host(A)), A)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        inverse, = ctx.saved_tensors
        t = inverse.transpose(-2, -1)
        return -(t @ g @ t)


class _Det(Function):
    @staticmethod
    def forward(ctx, A):  # noqa: N803
        ctx.save_for_backward(A)
        return _back(np.linalg.det(_host(A)), A)

    @staticmethod
    def backward(ctx, g):
        A, = ctx.saved_tensors  # noqa: N806
        d = _back(np.linalg.det(_host(A)), A)
        return (g * d).unsqueeze(-1).unsqueeze(-1) * inv(A.detach()).transpose(-2, -1)


class _Solve(Function):
    @staticmethod
    def forward(ctx, A, B):  # noqa: N803
        a, b = _host(A), _host(B)
        vector = b.ndim == a.ndim - 1
        x = _lapack("solve", np.linalg.solve, a, b[..., None])[..., 0] if vector else \
            _lapack("solve", np.linalg.solve, a, b)
        out = _back(x, B)
        ctx.save_for_backward(A, out)
        ctx.vector = vector
        return out

    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors  # noqa: N806
        gb = solve(A.detach().transpose(-2, -1), g)
        if ctx.vector:
            return -(gb.unsqueeze(-1) @ X.unsqueeze(-2)), gb
        return -(gb @ X.transpose(-2, -1)), gb


def inv(A, *, out=None):  # noqa: N803
    return _Inv.apply(A)


def det(A):  # noqa: N803
    return _Det.apply(A)


def solve(A, B, *, left=True, out=None):  # noqa: N803
    """X with A X = B, or X A = B when left=False (then A^T X^T = B^T); differentiable."""
    if not left:
        vector = B.dim() == A.dim() - 1
        x = _Solve.apply(A.transpose(-2, -1), B if vector else B.transpose(-2, -1))
        return x if vector else x.transpose(-2, -1)
    return _Solve.apply(A, B)


from trainrun._linalg_svd_qr import qr, slogdet, svd, svdvals  # noqa: E402,F401  (differentiable)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None):  # noqa: N803
    return trainrun.tensor(np.linalg.matrix_rank(_host(A), tol=tol, hermitian=hermitian))


# ---- compositions of the above (their gradients follow) ------------------------------------------------------
def cross(input, other, *, dim=-1, out=None):  # noqa: A002
    """The cross product of 3-vectors along dim (broadcast)."""
    if out is not None:
        raise NotImplementedError("linalg.cross(out=...) is not supported")
    a, b = trainrun.broadcast_tensors(input, other)
    if a.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[dim]} and "
                           f"{b.shape[dim]}")
    a0, a1, a2 = a.unbind(dim)
    b0, b1, b2 = b.unbind(dim)
    return trainrun.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim=dim)


def matrix_power(A, n):  # noqa: N803
    """A @ A @ ... (n times) by repeated squaring; n = 0: the identity; n < 0: powers of the inverse."""
    if n == 0:
        return trainrun.eye(A.shape[-1], dtype=A.dtype).expand(A.shape).clone()
    base = inv(A) if n < 0 else A
    n = abs(n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def matrix_exp(A):  # noqa: N803
    """exp(A) by scaling and squaring: a degree-18 Taylor series of A / 2^s, then s squarings (s from the
    1-norm), so that the series converges to float64 precision; differentiable (core ops only)."""
    norm = float(matrix_norm(A.detach().double(), 1).max()) if A.numel() else 0.0
    s = max(0, int(np.ceil(np.log2(norm))) + 1) if norm > 0.5 else 0
    X = A / (2.0 ** s)  # noqa: N806
    eye = trainrun.eye(A.shape[-1], dtype=A.dtype).expand(A.shape)
    result, term = eye, eye
    for k in range(1, 19):
        term = term @ X / k
        result = result + term
    for _ in range(s):
        result = result @ result
    return result


def pinv(A, *, atol=None, rtol=None, hermitian=False, rcond=None):  # noqa: N803
    """The Moore-Penrose pseudo-inverse (singular values below the cutoff dropped; host SVD, no gradient for a
    rank-deficient input: a full-column-rank one is differentiated through (A^T A)^-1 A^T)."""
    if _C.is_grad_enabled() and A.requires_grad:
        At = A.transpose(-2, -1)
        if A.shape[-2] >= A.shape[-1]:
            return solve(At @ A, At)
        return solve(A @ At, A).transpose(-2, -1)
    cutoff = rcond if rcond is not None else rtol
    a = _host(A)
    if cutoff is None:
        cutoff = max(a.shape[-2:]) * np.finfo(a.dtype).eps if atol is None else 0.0
    result = np.linalg.pinv(a, rcond=cutoff, hermitian=hermitian)
    return _back(result, A)


def lstsq(A, B, rcond=None, *, driver=None):  # noqa: N803
    """The least-squares solution of A X = B, as PyTorch's CPU default (driver 'gelsy'): (solution, residuals
    (empty), rank, singular_values (empty)); differentiable for a full-column-rank A (the normal equations)."""
    import collections
    result = collections.namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
    vector = B.dim() == A.dim() - 1
    b = B.unsqueeze(-1) if vector else B
    At = A.transpose(-2, -1)
    if A.shape[-2] >= A.shape[-1]:
        x = solve(At @ A, At @ b)
    else:
        x = At @ solve(A @ At, b)
    rank = trainrun.tensor(np.linalg.matrix_rank(_host(A.detach())), dtype=trainrun.int64)
    empty = trainrun.empty(0, dtype=A.dtype)
    return result(x.squeeze(-1) if vector else x, empty, rank, empty)


from trainrun._linalg_householder import householder_product  # noqa: E402,F401
from trainrun._linalg_decompositions import (LinAlgError, cholesky, eig, eigh, eigvals, eigvalsh,  # noqa: E402,F401
                                             lu, lu_factor, lu_factor_ex, lu_solve, tensorinv, tensorsolve)
