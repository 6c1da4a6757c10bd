"""linalg.svd, svdvals, qr and slogdet with their gradients. The factorizations run on the host through NumPy's
LAPACK (gesdd, geqrf/orgqr: the routines PyTorch's CPU calls, so U, Vh and Q come out with its signs); the
backward formulas are PyTorch's (FunctionsManual's svd_backward and linalg_qr_backward), written with core
ops, so a loss through singular values (a nuclear norm) or an orthogonalization (Q of A) trains."""
import collections

import numpy as np

import trainrun
from trainrun.autograd import Function
from trainrun._linalg_decompositions import back, host, lapack

SVDResult = collections.namedtuple("linalg_svd", ["U", "S", "Vh"])
QRResult = collections.namedtuple("linalg_qr", ["Q", "R"])
SlogdetResult = collections.namedtuple("linalg_slogdet", ["sign", "logabsdet"])


def _mT(x):  # noqa: N802
    return x.transpose(-2, -1)


# ---- SVD -----------------------------------------------------------------------------------------------------
def svd_backward(gU, gS, gVh, U, S, Vh):  # noqa: N803
    """The gradient of A = U diag(S) Vh (reduced: U [.., m, k], Vh [.., k, n]) given those of U, S and Vh
    (None: unused):
        gA = U [(skew(U^T gU) S + S skew(V^T gV)) / E + diag(gS)] Vh
             + (I - U U^T) gU S^-1 Vh      (m > k)
             + U S^-1 gVh (I - V V^T)      (n > k)
    with E_jk = S_k^2 - S_j^2 off the diagonal (repeated singular values make it infinite, as in PyTorch)."""
    m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
    if gU is None and gVh is None:
        return (U * gS.unsqueeze(-2)) @ Vh if gS is not None else None
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + trainrun.eye(k, dtype=S.dtype, device=S.device)  # noqa: N806
    inner = trainrun.zeros(S.shape[:-1] + (k, k), dtype=S.dtype, device=S.device)
    if gU is not None:
        UhgU = U.transpose(-2, -1) @ gU  # noqa: N806
        inner = inner + (UhgU - _mT(UhgU)) * S.unsqueeze(-2) / E
    if gVh is not None:
        VhgV = Vh @ _mT(gVh)  # noqa: N806
        inner = inner + S.unsqueeze(-1) * (VhgV - _mT(VhgV)) / E
    if gS is not None:
        inner = inner + trainrun.diag_embed(gS)
    if m > k and gU is not None:
        gU_Sinv = gU / S.unsqueeze(-2)  # noqa: N806
        return (U @ inner + gU_Sinv - U @ (_mT(U) @ gU_Sinv)) @ Vh
    if n > k and gVh is not None:
        Sinv_gVh = gVh / S.unsqueeze(-1)  # noqa: N806
        return U @ (inner @ Vh + Sinv_gVh - (Sinv_gVh @ _mT(Vh)) @ Vh)
    return U @ inner @ Vh


class _SVD(Function):
    @staticmethod
    def forward(ctx, A, full_matrices):  # noqa: N803
        u, s, vh = lapack("svd", np.linalg.svd, host(A), full_matrices=full_matrices)
        U, S, Vh = back(u, A), back(s, A), back(vh, A)  # noqa: N806
        k = S.shape[-1]
        # (full matrices: the columns past k do not enter the gradient, as in PyTorch)
        ctx.save_for_backward(U[..., :k], S, Vh[..., :k, :])
        ctx.full = full_matrices
        return U, S, Vh

    @staticmethod
    def backward(ctx, gU, gS, gVh):  # noqa: N803
        U, S, Vh = ctx.saved_tensors  # noqa: N806
        k = S.shape[-1]
        if ctx.full:
            gU = None if gU is None else gU[..., :k]  # noqa: N806
            gVh = None if gVh is None else gVh[..., :k, :]  # noqa: N806
        return svd_backward(gU, gS, gVh, U, S, Vh), None


class _Svdvals(Function):
    @staticmethod
    def forward(ctx, A):  # noqa: N803
        u, s, vh = lapack("svdvals", np.linalg.svd, host(A), full_matrices=False)
        ctx.save_for_backward(back(u, A), back(vh, A))
        return back(s, A)

    @staticmethod
    def backward(ctx, gS):  # noqa: N803
        U, Vh = ctx.saved_tensors  # noqa: N806
        return (U * gS.unsqueeze(-2)) @ Vh


def svd(A, full_matrices=True, *, driver=None, out=None):  # noqa: N803
    """A = U diag(S) Vh: (U, S, Vh), S descending; differentiable."""
    if out is not None:
        raise NotImplementedError("linalg.svd(out=...) is not supported")
    return SVDResult(*_SVD.apply(A, full_matrices))


def svdvals(A, *, driver=None, out=None):  # noqa: N803
    """A's singular values, descending; differentiable (gA = U diag(gS) Vh)."""
    if out is not None:
        raise NotImplementedError("linalg.svdvals(out=...) is not supported")
    return _Svdvals.apply(A)


# ---- QR ------------------------------------------------------------------------------------------------------
def _copyltu(M):  # noqa: N803
    """The lower triangle mirrored into the upper one (the diagonal kept once)."""
    lower = M.tril(-1)
    return lower + _mT(lower) + trainrun.diag_embed(M.diagonal(0, -2, -1))


def _qr_backward_tall(gQ, gR, Q, R):  # noqa: N803
    """m >= n, reduced: gA = [gQ + Q copyltu(R gR^T - gQ^T Q)] R^-T."""
    rhs = gQ + Q @ _copyltu(R @ _mT(gR) - _mT(gQ) @ Q)
    return _mT(trainrun.linalg.solve(R.triu(), _mT(rhs)))


class _QR(Function):
    @staticmethod
    def forward(ctx, A, mode):  # noqa: N803
        a = host(A)
        if mode == "r":
            r = lapack("qr", np.linalg.qr, a, mode="r")
            Q, R = trainrun.empty(0, dtype=A.dtype, device=A.device), back(r, A)  # noqa: N806
        else:
            q, r = lapack("qr", np.linalg.qr, a, mode=mode)
            Q, R = back(q, A), back(r, A)  # noqa: N806
        ctx.save_for_backward(A, Q, R)
        ctx.mode = mode
        return Q, R

    @staticmethod
    def backward(ctx, gQ, gR):  # noqa: N803
        A, Q, R = ctx.saved_tensors  # noqa: N806
        m, n = A.shape[-2], A.shape[-1]
        if ctx.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                               "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                               "linalg.qr.")
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        gQ = trainrun.zeros_like(Q) if gQ is None else gQ  # noqa: N806
        gR = trainrun.zeros_like(R) if gR is None else gR  # noqa: N806
        if m >= n:
            return _qr_backward_tall(gQ, gR, Q, R), None
        # A = [X | Y] with X = Q U square: Y = Q V adds Q gV to Y's gradient and Y gV^T to Q's.
        gV = gR[..., m:]  # noqa: N806
        Y = A[..., m:]  # noqa: N806
        gX = _qr_backward_tall(gQ + Y @ _mT(gV), gR[..., :m], Q, R[..., :m])  # noqa: N806
        return trainrun.cat([gX, Q @ gV], dim=-1), None


def qr(A, mode="reduced", *, out=None):  # noqa: N803
    """A = Q R: (Q, R), Q with orthonormal columns, R upper triangular; mode 'reduced', 'complete' or 'r' (Q
    empty); differentiable (not with 'r', nor 'complete' for a tall A, as PyTorch's)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    if out is not None:
        raise NotImplementedError("linalg.qr(out=...) is not supported")
    return QRResult(*_QR.apply(A, mode))


# ---- slogdet -------------------------------------------------------------------------------------------------
class _Slogdet(Function):
    @staticmethod
    def forward(ctx, A):  # noqa: N803
        sign, logabsdet = np.linalg.slogdet(host(A))
        ctx.save_for_backward(A)
        return back(sign, A), back(logabsdet, A)

    @staticmethod
    def backward(ctx, g_sign, g_logabsdet):
        A, = ctx.saved_tensors  # noqa: N806
        if g_logabsdet is None:
            return None
        return g_logabsdet.unsqueeze(-1).unsqueeze(-1) * _mT(trainrun.linalg.inv(A))


def slogdet(A, *, out=None):  # noqa: N803
    """(sign, log|det A|); log|det A| differentiable (its gradient is A^-T)."""
    return SlogdetResult(*_Slogdet.apply(A))
