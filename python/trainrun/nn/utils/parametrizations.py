"""torch.nn.utils.parametrizations: weight_norm, spectral_norm and orthogonal as parametrizations
(parametrize.py).

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


# ---- orthogonal ----------------------------------------------------------------------------------------------
_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _householder_product(A, tau):
    """The first k columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T, v_i column i of A below the diagonal with
    a 1 on it (linalg.householder_product), batched over A's leading dims."""
    n, k = A.shape[-2], A.shape[-1]
    eye = trainrun.eye(n, dtype=A.dtype, device=A.device)
    Q = eye[:, :k].expand(*A.shape[:-2], n, k)
    lower = A.tril(-1) + eye[:, :k]
    for i in reversed(range(k)):
        v = lower[..., :, i:i + 1]
        Q = Q - tau[..., i:i + 1].unsqueeze(-1) * (v @ (v.transpose(-2, -1) @ Q))
    return Q


def _make_orthogonal(A):
    """The Q of A's QR decomposition with R's diagonal made positive (a unique orthogonal matrix near A)."""
    Q, R = trainrun.linalg.qr(A)
    signs = R.diagonal(dim1=-2, dim2=-1).sign()
    signs = trainrun.where(signs == 0, trainrun.ones_like(signs), signs)
    return Q * signs.unsqueeze(-2)


class _Orthogonal(Module):
    """weight = an orthogonal matrix (orthonormal columns, or rows when wider than tall) made from an
    unconstrained `original` by orthogonal_map; with use_trivialization, the map's result multiplies `base`
    (the orthogonal matrix assigned last), so optimizing `original` from zero starts at that matrix."""

    def __init__(self, weight, orthogonal_map, use_trivialization=True):
        super().__init__()
        if weight.is_complex():
            raise NotImplementedError("orthogonal: complex weights are not supported")
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.transpose(-2, -1)
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X[..., :n, :n] if n == k else trainrun.cat([X, X.new_zeros(*X.shape[:-1], n - k)], dim=-1)
            A = X.tril()
            A = A - A.transpose(-2, -1)
            if self.orthogonal_map == "matrix_exp":
                Q = trainrun.linalg.matrix_exp(A)
            else:  # the Cayley map: (I - A/2)^-1 (I + A/2)
                eye = trainrun.eye(n, dtype=A.dtype, device=A.device)
                Q = trainrun.linalg.solve(eye - A / 2, eye + A / 2)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if getattr(self, "base", None) is not None:
            Q = self.base @ Q
        if transposed:
            Q = Q.transpose(-2, -1)
        return Q

    @no_grad()
    def right_inverse(self, Q):
        if tuple(Q.shape) != self.shape:
            raise ValueError(f"orthogonal: expected a matrix of shape {self.shape}, got {tuple(Q.shape)}")
        Q_init = Q
        n, k = Q.shape[-2], Q.shape[-1]
        if n < k:
            Q = Q.transpose(-2, -1)
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map != "householder":
                raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                          "parametrizations when use_trivialization=False.")
            raise NotImplementedError("orthogonal(orthogonal_map='householder', use_trivialization=False): "
                                      "assigning a matrix needs its Householder reflectors (geqrf), which trainrun "
                                      "does not compute; use the default use_trivialization=True")
        if n == k:
            eye = trainrun.eye(n, dtype=Q.dtype, device=Q.device)
            orthogonal = trainrun.allclose(Q.transpose(-2, -1) @ Q, eye.expand_as(Q), atol=1e-5)
            Q = Q.clone() if orthogonal else _make_orthogonal(Q)
        else:  # completed into an n x n orthogonal matrix
            completion = trainrun.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(trainrun.cat([Q, completion], dim=-1))
        self.base = Q
        # -I: the map of -I is I for every map (householder reads the diagonal's signs), so weight = base.
        neg_eye = trainrun.zeros_like(Q_init)
        neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_eye


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """module.name constrained to an orthogonal (or semi-orthogonal) matrix, as PyTorch's: orthogonal_map is
    "matrix_exp", "cayley" or "householder" (default: matrix_exp for square weights, householder otherwise).
    The current weight is orthogonalized (by QR) and becomes the starting point."""
    weight = getattr(module, name, None)
    if not _C._is_cpp_tensor(weight):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    parametrize.register_parametrization(module, name, _Orthogonal(weight, orthogonal_map, use_trivialization),
                                         unsafe=True)
    return module
