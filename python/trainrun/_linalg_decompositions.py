"""torch.linalg's factorizations beyond linalg.py's: LU (lu_factor, lu, lu_solve and their *_ex forms, with
torch.lu/lu_unpack/lu_solve), eig/eigvals (complex results, as ComplexTensor), tensorinv/tensorsolve, and the
gradients of cholesky, eigh and eigvalsh (PyTorch's formulas). The factorizations run on the host in float64
(LAPACK through NumPy, or the LU loop below); what LAPACK refuses is torch.linalg.LinAlgError, a RuntimeError."""
import collections

import numpy as np

import trainrun
from trainrun import _C
from trainrun.autograd import Function


class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: a matrix the factorization cannot handle (singular, not positive-definite)."""


def host(t):
    return t.detach().cpu().to(_C.dtype.float64).numpy()


def back(array, like, dtype=None):
    out = _C.from_numpy(np.require(np.asarray(array), requirements="C"))
    return out.to(dtype if dtype is not None else like.dtype).to(like.device)


def lapack(name, fn, *args, **kwargs):
    """fn(*args) with NumPy's LinAlgError turned into PyTorch's, naming the function."""
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError as error:
        reason = {"Singular matrix": "the input matrix is singular",
                  "Matrix is not positive definite": "the input is not positive-definite"}.get(str(error), str(error))
        raise LinAlgError(f"linalg.{name}: The factorization could not be completed because {reason}.") from None


def _refuse_grad(name, *tensors):
    if _C.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise NotImplementedError(f"linalg.{name} has no gradient in trainrun; call it under no_grad() or on "
                                  "detached tensors")


# ---- gradients of the symmetric factorizations ------------------------------------------------------------
def _phi(x):
    """The lower triangle with the diagonal halved (the Cholesky backward's projection)."""
    return x.tril(-1) + x.diagonal(0, -2, -1).diag_embed() * 0.5


class Cholesky(Function):
    @staticmethod
    def forward(ctx, A, upper):  # noqa: N803
        low = lapack("cholesky", np.linalg.cholesky, host(A))
        L = back(low, A)  # noqa: N806
        ctx.save_for_backward(L)
        ctx.upper = upper
        return L.transpose(-2, -1).contiguous() if upper else L

    @staticmethod
    def backward(ctx, g):
        L, = ctx.saved_tensors  # noqa: N806
        gL = g.transpose(-2, -1) if ctx.upper else g  # noqa: N806
        L_inv = trainrun.linalg.inv(L)  # noqa: N806
        S = L_inv.transpose(-2, -1) @ _phi(L.transpose(-2, -1) @ gL) @ L_inv  # noqa: N806
        return 0.5 * (S + S.transpose(-2, -1)), None


class Eigh(Function):
    @staticmethod
    def forward(ctx, A, uplo):  # noqa: N803
        w, v = lapack("eigh", np.linalg.eigh, host(A), uplo)
        values, vectors = back(w, A), back(v, A)
        ctx.save_for_backward(values, vectors)
        return values, vectors

    @staticmethod
    def backward(ctx, g_values, g_vectors):
        w, V = ctx.saved_tensors  # noqa: N806
        Vt = V.transpose(-2, -1)  # noqa: N806
        inner = trainrun.zeros_like(V) if g_vectors is None else Vt @ g_vectors
        inner = 0.5 * (inner - inner.transpose(-2, -1))  # (the skew-symmetric part: V stays orthogonal)
        gaps = w.unsqueeze(-2) - w.unsqueeze(-1)  # gaps[i, j] = w_j - w_i
        eye = trainrun.eye(w.shape[-1], dtype=w.dtype)
        inner = inner / (gaps + eye) * (1 - eye)
        if g_values is not None:
            inner = inner + g_values.diag_embed()
        return V @ inner @ Vt, None


def cholesky(A, *, upper=False, out=None):  # noqa: N803
    return Cholesky.apply(A, upper)


_EighResult = collections.namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])


def eigh(A, UPLO="L", *, out=None):  # noqa: N803
    return _EighResult(*Eigh.apply(A, UPLO))


def eigvalsh(A, UPLO="L", *, out=None):  # noqa: N803
    return Eigh.apply(A, UPLO)[0]


# ---- complex eigendecomposition ----------------------------------------------------------------------------
def _complex(array, like):
    from trainrun._complex import ComplexTensor
    array = np.asarray(array, dtype=np.complex128)
    pairs = np.stack([array.real, array.imag], axis=-1)
    return ComplexTensor(back(pairs, like))


_EigResult = collections.namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])


def eig(A, *, out=None):  # noqa: N803
    """Eigenvalues and eigenvectors of a general square matrix (complex, as ComplexTensors; no gradient)."""
    _refuse_grad("eig", A)
    w, v = lapack("eig", np.linalg.eig, host(A))
    return _EigResult(_complex(w, A), _complex(v, A))


def eigvals(A, *, out=None):  # noqa: N803
    _refuse_grad("eigvals", A)
    return _complex(lapack("eigvals", np.linalg.eigvals, host(A)), A)


# ---- LU with partial pivoting ------------------------------------------------------------------------------
def _lu_host(a):
    """(LU packed, pivots 1-based as LAPACK's getrf, info) for a batch of matrices [..., m, n]."""
    a = np.array(a, dtype=np.float64, copy=True)
    *batch, m, n = a.shape
    flat = a.reshape(-1, m, n)
    k = min(m, n)
    pivots = np.zeros((flat.shape[0], k), dtype=np.int32)
    info = np.zeros(flat.shape[0], dtype=np.int32)
    for b in range(flat.shape[0]):
        lu = flat[b]
        for j in range(k):
            p = j + int(np.argmax(np.abs(lu[j:, j])))
            pivots[b, j] = p + 1
            if lu[p, j] == 0.0:
                if info[b] == 0:
                    info[b] = j + 1
                continue
            if p != j:
                lu[[j, p]] = lu[[p, j]]
            lu[j + 1:, j] /= lu[j, j]
            lu[j + 1:, j + 1:] -= np.outer(lu[j + 1:, j], lu[j, j + 1:])
    return flat.reshape(a.shape), pivots.reshape(*batch, k), info.reshape(batch)


def _permutation(pivots, m):
    """The permutation matrix P of getrf's pivots, such that A = P L U."""
    *batch, k = pivots.shape
    flat = pivots.reshape(-1, k)
    out = np.zeros((flat.shape[0], m, m))
    for b in range(flat.shape[0]):
        order = np.arange(m)
        for j in range(k):
            p = flat[b, j] - 1
            order[[j, p]] = order[[p, j]]
        out[b][order, np.arange(m)] = 1.0
    return out.reshape(*batch, m, m)


_LUFactor = collections.namedtuple("linalg_lu_factor", ["LU", "pivots"])
_LUFactorEx = collections.namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_LU = collections.namedtuple("linalg_lu", ["P", "L", "U"])


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):  # noqa: N803
    if not pivot:
        raise NotImplementedError("linalg.lu_factor(pivot=False) is only supported on CUDA (as in PyTorch)")
    _refuse_grad("lu_factor", A)
    lu, pivots, info = _lu_host(host(A))
    if check_errors and (info > 0).any():
        raise LinAlgError(f"linalg.lu_factor: U[{int(info.max())}, {int(info.max())}] is zero, singular U.")
    return _LUFactorEx(back(lu, A), back(pivots, A, trainrun.int32), back(info, A, trainrun.int32))


def lu_factor(A, *, pivot=True, out=None):  # noqa: N803
    """A = P L U packed as LAPACK's getrf: (LU, pivots), pivots 1-based int32. A singular U is allowed (as
    PyTorch's); solving with it is not."""
    lu, pivots, _ = lu_factor_ex(A, pivot=pivot)
    return _LUFactor(lu, pivots)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):  # noqa: N803
    """(P, L, U) from lu_factor's packed result."""
    lu = host(LU_data)
    m, n = lu.shape[-2:]
    k = min(m, n)
    L = np.tril(lu[..., :, :k], -1) + np.eye(m, k)  # noqa: N806
    U = np.triu(lu[..., :k, :])  # noqa: N806
    P = _permutation(LU_pivots.detach().cpu().numpy().astype(np.int64), m)  # noqa: N806
    return _LU(back(P, LU_data), back(L, LU_data), back(U, LU_data))


def lu(A, *, pivot=True, out=None):  # noqa: N803
    """(P, L, U) with A = P @ L @ U."""
    return lu_unpack(*lu_factor(A, pivot=pivot))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):  # noqa: N803
    """The solution X of A X = B (left) or X A = B, A given by lu_factor (adjoint: with A's transpose)."""
    _refuse_grad("lu_solve", LU, B)
    P, L, U = (host(t) for t in lu_unpack(LU, pivots))  # noqa: N806
    A = P @ L @ U  # noqa: N806
    A = np.swapaxes(A, -1, -2) if adjoint else A  # noqa: N806
    b = host(B)
    if left:
        x = lapack("lu_solve", np.linalg.solve, A, b)
    else:
        x = np.swapaxes(lapack("lu_solve", np.linalg.solve, np.swapaxes(A, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    return back(x, B)


# ---- tensor inverses -----------------------------------------------------------------------------------------
def tensorinv(A, ind=2, *, out=None):  # noqa: N803
    """The inverse of A seen as a matrix of its first ind dims by the rest (differentiable)."""
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    m = int(np.prod(rows))
    if m != int(np.prod(cols)):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {int(np.prod(cols))} != {m}")
    return trainrun.linalg.inv(A.reshape(m, m)).reshape(cols + rows)


def tensorsolve(A, B, dims=None, *, out=None):  # noqa: N803
    """X with tensordot(A, X, X.ndim) == B (dims: A's dims moved to the end first; differentiable)."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.permute([d for d in range(A.ndim) if d not in dims] + dims)  # noqa: N806
    x_shape = tuple(A.shape[B.ndim:])
    m = B.numel()
    return trainrun.linalg.solve(A.reshape(m, -1), B.reshape(m)).reshape(x_shape)


# ---- torch.lu / torch.lu_solve (the deprecated top-level forms) and the methods --------------------------------
def torch_lu(A, pivot=True, get_infos=False, out=None):  # noqa: N803
    lu_, pivots, info = lu_factor_ex(A, pivot=pivot)
    return (lu_, pivots, info) if get_infos else (lu_, pivots)


def torch_lu_solve(b, LU_data, LU_pivots, *, out=None):  # noqa: N803
    return lu_solve(LU_data, LU_pivots, b)
