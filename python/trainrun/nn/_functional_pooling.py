"""The pooling functions of torch.nn.functional with PyTorch's signatures: max, average (ceil_mode,
count_include_pad, divisor_override), power-average (lp_pool) and adaptive pooling, 1-D forms as 2-D pooling of
height 1. The C++ kernels do max_pool2d and avg_pool2d; the rest are composites of core ops."""
import numpy as np

from trainrun import _C
from trainrun._op_table import op
from trainrun.nn._functional_layers import _as_rows, _pair, _single


def _pool_args(where, kernel_size, stride, padding):
    k = _pair(kernel_size, where, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else _pair(stride, where, "stride")
    return k, s, _pair(padding, where, "padding")


def pool_output_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooled length along one dim: floor((size + 2p - d(k-1) - 1) / s) + 1, or with ceil_mode the
    ceiling, less the last window when it would start past the input and its left padding."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def ceil_mode_padding(sizes, k, s, p, d):
    """Per pooled dim, how far ceil_mode's last window reaches past the padded input: padding the input's far end
    by this much with -inf makes the floor-mode kernels give ceil_mode's windows (a max never picks the -inf)."""
    return [max(0, (pool_output_size(n, k[i], s[i], p[i], d[i], True) - 1) * s[i] + d[i] * (k[i] - 1) + 1
                - (n + 2 * p[i])) for i, n in enumerate(sizes)]


@op(function=False, functional=True)
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """The C++ kernel (tensor/cpu/pool_kernels.cc) for every form: its indices are flat positions in each input
    plane (what max_unpool2d takes), and a window's maximum is the first of equal values, or its last NaN, as
    PyTorch's."""
    k, s, p = _pool_args("max_pool2d", kernel_size, stride, padding)
    d = _pair(dilation, "max_pool2d", "dilation")
    return _C.max_pool2d(input, k, s, p, d, bool(ceil_mode), bool(return_indices))


@op(function=False, functional=True)
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The inverse of max_pool2d(return_indices=True): each value back at its index, zeros elsewhere."""
    k, s, p = _pool_args("max_unpool2d", kernel_size, stride, padding)
    unbatched = input.dim() == 3
    x, idx = (input.unsqueeze(0), indices.unsqueeze(0)) if unbatched else (input, indices)
    n, c, height, width = x.shape
    if output_size is not None:
        out_h, out_w = list(output_size)[-2:]
    else:
        out_h, out_w = (height - 1) * s[0] - 2 * p[0] + k[0], (width - 1) * s[1] - 2 * p[1] + k[1]
    flat = _C.zeros([n, c, out_h * out_w], dtype=x.dtype, device=x.device)
    out = flat.scatter(2, idx.reshape([n, c, -1]), x.reshape([n, c, -1])).reshape([n, c, out_h, out_w])
    return out.squeeze(0) if unbatched else out


def _window_counts(size, k, s, p, ceil_mode):
    """Per output position along one dim, how many of its window's elements lie in the input (PyTorch's pooling
    windows: start o*s - p, end clipped to size + p, ceil_mode keeping a last window that starts in the input)."""
    out = (size + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    starts = np.arange(out) * s - p
    ends = np.minimum(starts + k, size + p)
    return np.minimum(ends, size) - np.maximum(starts, 0)


@op(function=False, functional=True)
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """The C++ kernel averages (over the window within input and padding, or over its part in the input when
    count_include_pad=False); divisor_override divides each window's sum by that number instead."""
    k, s, p = _pool_args("avg_pool2d", kernel_size, stride, padding)
    if divisor_override is None:
        return _C.avg_pool2d(input, k, s, p, bool(ceil_mode), bool(count_include_pad))
    if isinstance(divisor_override, bool) or not isinstance(divisor_override, int) or divisor_override == 0:
        raise ValueError(f"avg_pool2d(): divisor_override must be a non-zero int, got {divisor_override!r}")
    mean = _C.avg_pool2d(input, k, s, p, bool(ceil_mode), False)  # the sum over the input's part, divided by its size
    rows = _window_counts(input.shape[-2], k[0], s[0], p[0], ceil_mode)
    cols = _window_counts(input.shape[-1], k[1], s[1], p[1], ceil_mode)
    counts = _C.from_numpy(np.outer(rows, cols).astype(np.float32)).to(device=input.device, dtype=input.dtype)
    return mean * counts / float(divisor_override)


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, pool, window):  # noqa: A002
    """PyTorch's lp_pool: (sum over the window of x^p)^(1/p), from the average pool of x^p times the window size."""
    p = float(norm_type)
    out = pool(input.pow(p), kernel_size, stride, 0, ceil_mode)
    return (_C.sign(out) * _C.relu(out.abs())).mul(window).pow(1.0 / p)


@op(function=False, functional=True)
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    kh, kw = _pair(kernel_size, "lp_pool2d", "kernel_size")
    return _lp_pool(input, norm_type, [kh, kw], stride, ceil_mode, avg_pool2d, kh * kw)


@op(function=False, functional=True)
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    from trainrun.nn._functional_3d import _triple, avg_pool3d
    k = _triple(kernel_size, "lp_pool3d", "kernel_size")
    return _lp_pool(input, norm_type, k, stride if stride is not None else k, ceil_mode, avg_pool3d, k[0] * k[1] * k[2])


@op(function=False, functional=True)
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    k = _single(kernel_size, "lp_pool1d", "kernel_size")
    return _lp_pool(input, norm_type, k, stride, ceil_mode, avg_pool1d, k)


def _adaptive_pool2d(input, output_size, reduce, where):  # noqa: A002
    out_h, out_w = _pair(output_size if not isinstance(output_size, (tuple, list)) else
                         [input.shape[-2 + i] if v is None else v for i, v in enumerate(output_size)], where,
                         "output_size")
    in_h, in_w = input.shape[-2], input.shape[-1]
    if reduce == "mean" and out_h == 1 and out_w == 1 and in_h * in_w > 0:  # a global average (a CNN's head): a
        return input.mean(dim=(-2, -1), keepdim=True)  # row reduction per plane, not one 224x224 window
    # (Not amax for max: on ties, a ReLU's zeros, its gradient splits where the pool's goes to one index.)
    if in_h % out_h == 0 and in_w % out_w == 0:  # even windows: one pooling kernel
        k = [in_h // out_h, in_w // out_w]
        return (_C.avg_pool2d if reduce == "mean" else lambda x, k, s, p: _C.max_pool2d(x, k, s, p))(input, k, k,
                                                                                                   [0, 0])
    rows = []
    for i in range(out_h):  # PyTorch's windows: [floor(i * in / out), ceil((i + 1) * in / out))
        h0, h1 = (i * in_h) // out_h, -((-(i + 1) * in_h) // out_h)
        cols = []
        for j in range(out_w):
            w0, w1 = (j * in_w) // out_w, -((-(j + 1) * in_w) // out_w)
            cell = input.narrow(-2, h0, h1 - h0).narrow(-1, w0, w1 - w0)
            cols.append(cell.mean(dim=(-2, -1)) if reduce == "mean" else cell.amax(dim=(-2, -1)))
        rows.append(_C.stack(cols, -1))
    return _C.stack(rows, -2)


@op(function=False, functional=True)
def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    return _adaptive_pool2d(input, output_size, "mean", "adaptive_avg_pool2d")


@op(function=False, functional=True)
def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    if return_indices:
        from trainrun.nn._functional_pooling_indices import adaptive_max_pool_with_indices
        return adaptive_max_pool_with_indices(input, output_size, 2, "adaptive_max_pool2d")
    return _adaptive_pool2d(input, output_size, "max", "adaptive_max_pool2d")


@op(function=False, functional=True)
def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, output_size)).squeeze(-2)


@op(function=False, functional=True)
def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    if return_indices:
        from trainrun.nn._functional_pooling_indices import adaptive_max_pool_with_indices
        return adaptive_max_pool_with_indices(input, output_size, 1, "adaptive_max_pool1d")
    size = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    return adaptive_max_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


@op(function=True, functional=True)
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    k = _single(kernel_size, "max_pool1d", "kernel_size")
    s = k if stride is None or stride == [] else _single(stride, "max_pool1d", "stride")
    p = _single(padding, "max_pool1d", "padding")
    if return_indices or _single(dilation, "max_pool1d", "dilation") != 1:
        out = max_pool2d(_as_rows(input, "max_pool1d"), [1, k], [1, s], [0, p], [1, _single(
            dilation, "max_pool1d", "dilation")], ceil_mode, return_indices=True)
        return (out[0].squeeze(-2), out[1].squeeze(-2)) if return_indices else out[0].squeeze(-2)
    return max_pool2d(_as_rows(input, "max_pool1d"), [1, k], [1, s], [0, p], ceil_mode=ceil_mode).squeeze(-2)


@op(function=True, functional=True)
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):  # noqa: A002
    k = _single(kernel_size, "avg_pool1d", "kernel_size")
    s = k if stride is None or stride == [] else _single(stride, "avg_pool1d", "stride")
    p = _single(padding, "avg_pool1d", "padding")
    return avg_pool2d(_as_rows(input, "avg_pool1d"), [1, k], [1, s], [0, p], ceil_mode, count_include_pad).squeeze(-2)
