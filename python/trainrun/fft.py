"""trainrun.fft: PyTorch's torch.fft (fft/ifft, rfft/irfft, hfft/ihfft, their 2-D and n-D forms, fftfreq,
rfftfreq, fftshift, ifftshift) with its arguments (n/s, dim, norm="backward"|"ortho"|"forward").

trainrun's core has no complex dtype: complex results are ComplexTensors (trainrun/_complex.py, real and
imaginary parts as real pairs). A transform is computed from real matrix products, so autograd differentiates
it and trainrun.compile records it like any other ops: a length with a factor near its square root is split
into two shorter transforms and a twiddle product (the four-step Cooley-Tukey form, applied recursively);
short or prime lengths are one product with the DFT matrix. Twiddles are computed in float64, then cast."""
import functools
import math

import numpy as np

import trainrun
from trainrun import _C
from trainrun._complex import ComplexTensor

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift", "hfft2", "hfftn", "ihfft2", "ihfftn"]

_DIRECT_UP_TO = 64  # lengths transformed by one matrix product


def _parts(input, where):  # noqa: A002
    """(real part, imaginary part or None) as floating tensors."""
    if isinstance(input, ComplexTensor):
        return input.real, input.imag
    if not _C._is_cpp_tensor(input):
        raise TypeError(f"{where}(): expected a tensor, got {type(input).__name__}")
    if not input.is_floating_point():
        input = input.to(_C._ops.get_default_dtype())
    return input, None


def _complex(re, im):
    return ComplexTensor(trainrun.stack([re, im if im is not None else re * 0], -1))


@functools.lru_cache(maxsize=256)
def _roots(rows, cols, n, sign, dtype_name, device):
    """cos and sin of sign * 2 pi j k / n for j < rows, k < cols, as (rows, cols) tensors of the dtype on the
    device: the DFT matrix (rows = cols = n) or a four-step split's twiddles. Computed in float64, with the
    rounding residue at the quarter turns set to the exact 0 (sin(pi) is 1e-16)."""
    angles = sign * 2.0 * math.pi * (np.outer(np.arange(rows), np.arange(cols)) % n) / n
    dtype = getattr(_C.dtype, dtype_name)
    return tuple(_C.from_numpy(np.ascontiguousarray(np.where(np.abs(v) < 1e-12, 0.0, v))).to(device=device,
                                                                                          dtype=dtype)
                 for v in (np.cos(angles), np.sin(angles)))


def _split(n):
    """A factor of n nearest its square root from below (1 when n is prime)."""
    for f in range(int(math.isqrt(n)), 1, -1):
        if n % f == 0:
            return f
    return 1


def _dft_last(re, im, sign):
    """The unnormalized DFT along the last dim (exponent sign: -1 forward, +1 inverse) of re + i im."""
    n = re.shape[-1]
    if n == 1:
        return re, im if im is not None else re * 0
    n1 = _split(n) if n > _DIRECT_UP_TO else 1
    key = (re.dtype.name, str(re.device))
    if n1 == 1:
        cos, sin = _roots(n, n, n, sign, *key)
        if im is None:
            return _C.matmul(re, cos), _C.matmul(re, sin)
        return _C.matmul(re, cos) - _C.matmul(im, sin), _C.matmul(re, sin) + _C.matmul(im, cos)
    n2 = n // n1
    lead = list(re.shape[:-1])
    # x[j1, j2] = x[n2 j1 + j2]; transform along j1, twist by W^(k1 j2), transform along j2; X[k1 + n1 k2].
    re = re.reshape(lead + [n1, n2]).transpose(-1, -2)
    im = im.reshape(lead + [n1, n2]).transpose(-1, -2) if im is not None else None
    re, im = _dft_last(re, im, sign)  # (..., j2, k1)
    cos, sin = _roots(n1, n2, n, sign, *key)
    cos, sin = cos.t(), sin.t()
    re, im = re * cos - im * sin, re * sin + im * cos
    re, im = _dft_last(re.transpose(-1, -2), im.transpose(-1, -2), sign)  # (..., k1, k2)
    return re.transpose(-1, -2).reshape(lead + [n]), im.transpose(-1, -2).reshape(lead + [n])


def _resized(t, n, dim):
    """t trimmed or zero-padded to length n along dim."""
    if t is None or n is None or t.shape[dim] == n:
        return t
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    if t.shape[dim] > n:
        return t.narrow(dim, 0, n)
    shape = list(t.shape)
    shape[dim] = n - t.shape[dim]
    return _C.cat([t, _C.zeros(shape, dtype=t.dtype, device=t.device)], dim)


def _scale(norm, n, inverse, where):
    if norm is None or norm == "backward":
        return 1.0 / n if inverse else 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if norm == "forward":
        return 1.0 if inverse else 1.0 / n
    raise ValueError(f'{where}(): Invalid normalization mode: "{norm}"')


def _transform(re, im, dim, n, norm, inverse, where):
    """One complex transform along dim: resized to n, then the DFT, then the norm's scale."""
    dim = dim % re.ndim if re.ndim else 0
    re, im = _resized(re, n, dim), _resized(im, n, dim)
    length = re.shape[dim]
    last = dim == re.ndim - 1
    if not last:
        re = re.transpose(dim, -1)
        im = im.transpose(dim, -1) if im is not None else None
    re, im = _dft_last(re, im, 1 if inverse else -1)
    if not last:
        re, im = re.transpose(dim, -1), im.transpose(dim, -1)
    scale = _scale(norm, length, inverse, where)
    return (re, im) if scale == 1.0 else (re * scale, im * scale)


def _dims(input, s, dim, default_all, where):  # noqa: A002
    ndim = input.ndim
    if dim is None:
        dims = list(range(ndim - len(s), ndim)) if s is not None else (list(range(ndim)) if default_all else
                                                                       [ndim - 2, ndim - 1])
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [d % ndim for d in dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{where}(): dims must be unique, got {dims}")
    sizes = [None] * len(dims) if s is None else list(s)
    if len(sizes) != len(dims):
        raise RuntimeError(f"{where}(): when given, dim and shape arguments must have the same length")
    return dims, [None if v == -1 else v for v in sizes]


# ---- one dim ----------------------------------------------------------------------------------------------
def fft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The discrete Fourier transform along dim (a complex result)."""
    re, im = _parts(input, "fft")
    return _complex(*_transform(re, im, dim, n, norm, False, "fft"))


def ifft(input, n=None, dim=-1, norm=None):  # noqa: A002
    re, im = _parts(input, "ifft")
    return _complex(*_transform(re, im, dim, n, norm, True, "ifft"))


def rfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """fft of a real input, keeping the n // 2 + 1 non-negative frequencies (the rest are their conjugates)."""
    if isinstance(input, ComplexTensor):
        raise RuntimeError("rfft expects a real input tensor, but got ComplexFloat")
    re, _ = _parts(input, "rfft")
    re, im = _transform(re, None, dim, n, norm, False, "rfft")
    d = dim % re.ndim
    keep = re.shape[d] // 2 + 1
    return _complex(re.narrow(d, 0, keep), im.narrow(d, 0, keep))


def _hermitian_full(re, im, d, n):
    """The whole spectrum of a real signal of length n from its first n // 2 + 1 coefficients along d."""
    half = n // 2 + 1
    re, im = _resized(re, half, d), _resized(im if im is not None else re * 0, half, d)
    mirrored = n - half  # coefficients n - 1 down to half: the conjugates of 1 .. n - half
    if mirrored == 0:
        return re, im
    tail_re = re.narrow(d, 1, mirrored).flip(d)
    tail_im = -im.narrow(d, 1, mirrored).flip(d)
    return _C.cat([re, tail_re], d), _C.cat([im, tail_im], d)


def irfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The real signal (length n, default 2 (m - 1)) whose rfft is input's m coefficients along dim."""
    re, im = _parts(input, "irfft")
    d = dim % re.ndim
    n = 2 * (re.shape[d] - 1) if n is None else n
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    re, im = _hermitian_full(re, im, d, n)
    return _transform(re, im, d, None, norm, True, "irfft")[0]


def hfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The real spectrum of a Hermitian-symmetric signal given by its first half (irfft of the conjugate, with
    the norm's scale mirrored)."""
    re, im = _parts(input, "hfft")
    return irfft(_complex(re, -im if im is not None else None), n, dim, _mirrored(norm))


def ihfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    return rfft(input, n, dim, _mirrored(norm)).conj()


def _mirrored(norm):
    """hfft's norm as the irfft it is computed by sees it (the scale moves to the other direction)."""
    return {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}.get(norm, norm)


# ---- several dims -----------------------------------------------------------------------------------------
def _fftn(input, s, dim, norm, inverse, where, default_all):  # noqa: A002
    re, im = _parts(input, where)
    dims, sizes = _dims(re, s, dim, default_all, where)
    for d, size in zip(dims, sizes):
        re, im = _transform(re, im, d, size, norm, inverse, where)
    return _complex(re, im)


def fftn(input, s=None, dim=None, norm=None):  # noqa: A002
    return _fftn(input, s, dim, norm, False, "fftn", True)


def ifftn(input, s=None, dim=None, norm=None):  # noqa: A002
    return _fftn(input, s, dim, norm, True, "ifftn", True)


def fft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return _fftn(input, s, dim, norm, False, "fft2", False)


def ifft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return _fftn(input, s, dim, norm, True, "ifft2", False)


def _rfftn(input, s, dim, norm, where, default_all):  # noqa: A002
    re, _ = _parts(input, where)
    dims, sizes = _dims(re, s, dim, default_all, where)
    last = rfft(re, sizes[-1], dims[-1], norm)
    re, im = last.real, last.imag
    for d, size in zip(dims[:-1], sizes[:-1]):
        re, im = _transform(re, im, d, size, norm, False, where)
    return _complex(re, im)


def rfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    return _rfftn(input, s, dim, norm, "rfftn", True)


def rfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return _rfftn(input, s, dim, norm, "rfft2", False)


def _irfftn(input, s, dim, norm, where, default_all):  # noqa: A002
    re, im = _parts(input, where)
    dims, sizes = _dims(re, s, dim, default_all, where)
    for d, size in zip(dims[:-1], sizes[:-1]):
        re, im = _transform(re, im, d, size, norm, True, where)
    return irfft(_complex(re, im), sizes[-1], dims[-1], norm)


def irfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    return _irfftn(input, s, dim, norm, "irfftn", True)


def irfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return _irfftn(input, s, dim, norm, "irfft2", False)


def _conj(input, where):  # noqa: A002
    re, im = _parts(input, where)
    return _complex(re, -im if im is not None else None)


def hfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """The n-d real spectrum of a Hermitian-symmetric signal given by its half along the last dim."""
    return _irfftn(_conj(input, "hfftn"), s, dim, _mirrored(norm), "hfftn", True)


def hfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return _irfftn(_conj(input, "hfft2"), s, dim, _mirrored(norm), "hfft2", False)


def ihfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """The inverse of hfftn: the half spectrum (last dim) of a real signal, conjugated."""
    return _rfftn(input, s, dim, _mirrored(norm), "ihfftn", True).conj()


def ihfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return _rfftn(input, s, dim, _mirrored(norm), "ihfft2", False).conj()


# ---- frequencies and shifts -------------------------------------------------------------------------------
def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, **_):
    """The sample frequencies of an n-point fft: 0, 1, ..., -(n // 2), ..., -1 over (d n)."""
    values = np.fft.fftfreq(int(n), d)
    out = trainrun.tensor(values.tolist(), dtype=dtype or _C._ops.get_default_dtype(), device=device)
    return out.requires_grad_(requires_grad) if requires_grad else out


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, **_):
    values = np.fft.rfftfreq(int(n), d)
    out = trainrun.tensor(values.tolist(), dtype=dtype or _C._ops.get_default_dtype(), device=device)
    return out.requires_grad_(requires_grad) if requires_grad else out


def _shift(input, dim, sign):  # noqa: A002
    dims = list(range(input.ndim)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    shifts = [sign * (input.shape[d] // 2) for d in dims]
    if isinstance(input, ComplexTensor):
        return ComplexTensor(trainrun.roll(input._pairs, shifts, [d % input.ndim for d in dims]))
    return trainrun.roll(input, shifts, dims)


def fftshift(input, dim=None):  # noqa: A002
    """The zero frequency moved to the middle: a roll by n // 2 along each dim."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):  # noqa: A002
    return _shift(input, dim, -1)
