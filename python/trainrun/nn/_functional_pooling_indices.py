"""The max pools that return where each maximum came from (return_indices=True, and PyTorch's *_with_indices
functions): max_pool1d/3d, adaptive_max_pool1d/2d/3d; and max_unpool1d/3d, which put values back at those
indices. An index is the flat position in the input's plane (volume), d * H * W + h * W + w, the first of equal
maxima, as PyTorch's. The values come from a max over stacked windows, so gradients flow to the maxima."""
import itertools
import math

import numpy as np

from trainrun import _C
from trainrun._op_table import op
from trainrun.nn._functional_3d import _batched, _triple
from trainrun.nn._functional_layers import pad
from trainrun.nn._functional_pooling import ceil_mode_padding, pool_output_size


def _int64(values, device):
    return _C.from_numpy(np.asarray(values, dtype=np.int64)).to(device)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=True):
    x, unbatched = _batched(input, "max_pool3d")
    k = _triple(kernel_size, "max_pool3d", "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else \
        _triple(stride, "max_pool3d", "stride")
    p, d = _triple(padding, "max_pool3d", "padding"), _triple(dilation, "max_pool3d", "dilation")
    sizes = list(x.shape[2:])
    out = [pool_output_size(sizes[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(3)]
    if min(out) <= 0:
        raise ValueError(f"max_pool3d: the kernel {k} (dilation {d}) does not fit the padded input {sizes}")
    e = ceil_mode_padding(sizes, k, s, p, d) if ceil_mode else [0, 0, 0]
    padded = pad(x, [p[2], p[2] + e[2], p[1], p[1] + e[1], p[0], p[0] + e[0]], value=float("-inf")) \
        if any(p + e) else x
    taps = list(itertools.product(range(k[0]), range(k[1]), range(k[2])))
    windows = [padded[:, :, a * d[0]:a * d[0] + s[0] * (out[0] - 1) + 1:s[0],
                      b * d[1]:b * d[1] + s[1] * (out[1] - 1) + 1:s[1],
                      c * d[2]:c * d[2] + s[2] * (out[2] - 1) + 1:s[2]] for a, b, c in taps]
    values, which = _C.stack(windows, 0).max(dim=0)
    device = x.device
    tap_d, tap_h, tap_w = (_int64([t[i] for t in taps], device) for i in range(3))
    grid = [_C.arange(o, dtype=_C.dtype.int64).to(device) * s[i] - p[i] for i, o in enumerate(out)]
    depth = grid[0].reshape([-1, 1, 1]) + tap_d[which] * d[0]
    rows = grid[1].reshape([1, -1, 1]) + tap_h[which] * d[1]
    cols = grid[2].reshape([1, 1, -1]) + tap_w[which] * d[2]
    indices = (depth * sizes[1] + rows) * sizes[2] + cols
    if not return_indices:
        return values.squeeze(0) if unbatched else values
    return (values.squeeze(0), indices.squeeze(0)) if unbatched else (values, indices)


def _adaptive_bounds(size, out):
    return [(math.floor(i * size / out), math.ceil((i + 1) * size / out)) for i in range(out)]


def adaptive_max_pool_with_indices(input, output_size, n, where):  # noqa: A002
    """(values, indices) of PyTorch's adaptive max pool over the last n dims (window i: floor(i*L/o) to
    ceil((i+1)*L/o))."""
    if input.dim() not in (n + 1, n + 2):
        raise ValueError(f"{where}(): expected a {n + 1}-D (unbatched) or {n + 2}-D input, got {input.dim()}-D")
    unbatched = input.dim() == n + 1
    x = input.unsqueeze(0) if unbatched else input
    sizes = list(x.shape[2:])
    wanted = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size] * n
    wanted = [sizes[i] if w is None else int(w) for i, w in enumerate(wanted)]
    bounds = [_adaptive_bounds(sizes[i], wanted[i]) for i in range(n)]
    values, indices = [], []
    for cell in itertools.product(*bounds):
        window = x
        for axis, (start, end) in enumerate(cell):
            window = window.narrow(2 + axis, start, end - start)
        extents = [end - start for start, end in cell]
        best, local = window.reshape(list(x.shape[:2]) + [-1]).max(dim=-1)
        flat = local * 0
        remainder = local
        for axis in range(n - 1, -1, -1):  # local (row-major in the window) -> flat position in the input
            coordinate = remainder % extents[axis] + cell[axis][0]
            remainder = remainder // extents[axis]
            stride = 1
            for later in sizes[axis + 1:]:
                stride *= later
            flat = flat + coordinate * stride
        values.append(best)
        indices.append(flat)
    shape = list(x.shape[:2]) + wanted
    out_values, out_indices = _C.stack(values, -1).reshape(shape), _C.stack(indices, -1).reshape(shape)
    return (out_values.squeeze(0), out_indices.squeeze(0)) if unbatched else (out_values, out_indices)


def max_unpool(input, indices, kernel_size, stride, padding, output_size, n, where):  # noqa: A002
    """Values back at their flat indices in planes (volumes) of the unpooled size, zeros elsewhere."""
    def each(value):
        return list(value) if isinstance(value, (tuple, list)) else [value] * n
    k = each(kernel_size)
    s = k if stride is None else each(stride)
    p = each(padding)
    unbatched = input.dim() == n + 1
    x, idx = (input.unsqueeze(0), indices.unsqueeze(0)) if unbatched else (input, indices)
    sizes = list(x.shape[2:])
    if output_size is not None:
        out = list(output_size)[-n:]
    else:
        out = [(sizes[i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(n)]
    total = 1
    for o in out:
        total *= o
    batch, channels = x.shape[0], x.shape[1]
    if idx.numel() and int(idx.max()) >= total:
        raise RuntimeError(f"{where}: found an invalid max index {int(idx.max())} (output volumes are of size "
                           f"{'x'.join(str(o) for o in out)})")
    flat = _C.zeros([batch, channels, total], dtype=x.dtype, device=x.device)
    result = flat.scatter(2, idx.reshape([batch, channels, -1]), x.reshape([batch, channels, -1]))
    result = result.reshape([batch, channels] + out)
    return result.squeeze(0) if unbatched else result


@op(function=False, functional=True)
def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    return max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


@op(function=False, functional=True)
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    return max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")
