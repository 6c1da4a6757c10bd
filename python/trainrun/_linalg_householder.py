"""QR in LAPACK's compact form, as PyTorch exposes it: torch.geqrf(A) -> (a, tau), the R factor on and above a's
diagonal and the Householder vectors below it; linalg.householder_product(A, tau) (torch.orgqr) -> the first
columns of Q = H_1 ... H_k, H_i = I - tau_i v_i v_i^H; torch.ormqr(A, tau, C, left, transpose) -> Q C, Q^T C,
C Q or C Q^T without forming Q. geqrf runs LAPACK's dgeqrf through NumPy (no gradient, as PyTorch's);
householder_product and ormqr are products of core ops, so autograd differentiates them."""
import collections

import numpy as np

import trainrun
from trainrun import _C
from trainrun._linalg_decompositions import back, host

_Geqrf = collections.namedtuple("geqrf", ["a", "tau"])


def geqrf(input, *, out=None):  # noqa: A002
    if input.dim() < 2:
        raise RuntimeError(f"geqrf: The input tensor A must have at least 2 dimensions, got {input.dim()}")
    if _C.is_grad_enabled() and input.requires_grad:
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
                           "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    a = host(input)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    flat = a.reshape((-1, m, n))
    packed = np.empty_like(flat)
    taus = np.empty((flat.shape[0], min(m, n)))
    for i, matrix in enumerate(flat):
        h, tau = np.linalg.qr(matrix, mode="raw")  # (LAPACK's output, transposed: Fortran order)
        packed[i], taus[i] = h.T, tau
    result = _Geqrf(back(packed.reshape(a.shape), input), back(taus.reshape(batch + (min(m, n),)), input))
    if out is not None:
        for o, r in zip(out, result):
            o.resize_(r.shape).copy_(r)
        return out
    return result


def _reflector(A, i):
    """v_i: 1 at row i, A's column i below it, zeros above."""
    m = A.shape[-2]
    column = A[..., :, i]
    rows = trainrun.arange(m, device=A.device)
    return trainrun.where(rows > i, column, (rows == i).to(A.dtype))


def _apply(A, tau, C, left, transpose):
    """Q C (or Q^T C, C Q, C Q^T) with Q = H_0 ... H_{k-1}, each H_i applied in turn (never forming Q)."""
    k = tau.shape[-1]
    # Q C = H_0 (H_1 (... H_{k-1} C)): the last reflector first; Q^T C = H_{k-1} (... H_0 C): the first first.
    # C Q = ((C H_0) H_1) ...: the first first; C Q^T: the last first.
    order = range(k - 1, -1, -1) if left != transpose else range(k)
    for i in order:
        v = _reflector(A, i)
        t = tau[..., i].unsqueeze(-1).unsqueeze(-1)
        if left:
            C = C - t * v.unsqueeze(-1) @ (v.unsqueeze(-2) @ C)
        else:
            C = C - t * (C @ v.unsqueeze(-1)) @ v.unsqueeze(-2)
    return C


def householder_product(A, tau, *, out=None):  # noqa: N803
    """The first n columns of H_0 ... H_{k-1} (A: m x n, m >= n >= k = tau's length)."""
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError(f"torch.linalg.householder_product: input.shape[-2] must be greater than or equal to "
                           f"input.shape[-1] (got {m} and {n})")
    if tau.shape[-1] > n:
        raise RuntimeError(f"torch.linalg.householder_product: input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1] (got {n} and {tau.shape[-1]})")
    eye = trainrun.eye(m, n, dtype=A.dtype, device=A.device).expand(list(A.shape[:-2]) + [m, n])
    result = _apply(A, tau, eye, left=True, transpose=False)
    if out is not None:
        out.resize_(result.shape).copy_(result)
        return out
    return result


def ormqr(input, tau, other, left=True, transpose=False, *, out=None):  # noqa: A002
    """Q other (left) or other Q (right), Q transposed when asked, Q the product of input's reflectors."""
    result = _apply(input, tau, other, left, transpose)
    if out is not None:
        out.resize_(result.shape).copy_(result)
        return out
    return result


def orgqr(input, tau):  # noqa: A002
    return householder_product(input, tau)
