"""Fractional max pooling (Graham, 2014): F.fractional_max_pool2d/3d and their modules. Each output cell pools a
kernel_size window whose start comes from a pseudo-random increasing sequence per plane, PyTorch's:
start[i] = int((i + u) * alpha) - int(u * alpha) with alpha = (input - kernel) / (output - 1), the last window at
the end; u is a uniform sample per (sample, channel, dim) (_random_samples, or drawn). The values are a gather
and a max, so gradients flow to each window's maximum; indices are flat positions in the input plane (volume)."""
import itertools

import numpy as np

from trainrun import _C
from trainrun._op_table import op


def _sizes(value, n, what):
    if value is None:
        return None
    values = list(value) if isinstance(value, (tuple, list)) else [value] * n
    if len(values) != n:
        raise ValueError(f"fractional_max_pool{n}d: {what} must be an int or {n} ints, got {value}")
    return values


def _starts(sample, input_size, output_size, kernel):
    """PyTorch's interval sequence (computed in float32, as its kernel does for float inputs)."""
    sequence = np.zeros(output_size, dtype=np.int64)
    if output_size > 1:
        alpha = np.float32(input_size - kernel) / np.float32(output_size - 1)
        for i in range(output_size - 1):
            sequence[i] = int(np.float32(i + sample) * alpha) - int(np.float32(sample) * alpha)
    if output_size > 0:
        sequence[output_size - 1] = input_size - kernel
    return sequence


def _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, random_samples,  # noqa: A002
                         n, sample_order):
    where = f"fractional_max_pool{n}d"
    unbatched = input.dim() == n + 1
    if input.dim() not in (n + 1, n + 2):
        raise ValueError(f"{where}(): expected a {n + 1}-D (unbatched) or {n + 2}-D input, got {input.dim()}-D")
    x = input.unsqueeze(0) if unbatched else input
    batch, channels, sizes = x.shape[0], x.shape[1], list(x.shape[2:])
    kernel = _sizes(kernel_size, n, "kernel_size")
    if output_size is None and output_ratio is None:
        raise ValueError(f"{where} requires specifying either an output_size or an output_ratio")
    out = _sizes(output_size, n, "output_size") if output_size is not None else \
        [int(s * r) for s, r in zip(sizes, _sizes(output_ratio, n, "output_ratio"))]
    for s, o, k in zip(sizes, out, kernel):
        if o + k - 1 > s:
            raise ValueError(f"{where}(): pool size {k} and output size {o} are too large for the input size {s}")
    if random_samples is None:
        random_samples = _C.rand([batch, channels, n], dtype=x.dtype)
    samples = random_samples.detach().reshape([batch, channels, n]).to(_C.dtype.float32).numpy()
    # flat positions of every window element: (batch, channels, *out, prod(kernel))
    strides = [int(np.prod(sizes[d + 1:])) for d in range(n)]
    offsets = np.array([sum(o * st for o, st in zip(tap, strides))
                        for tap in itertools.product(*[range(k) for k in kernel])], dtype=np.int64)
    positions = np.zeros([batch, channels] + out + [len(offsets)], dtype=np.int64)
    for b in range(batch):
        for c in range(channels):
            starts = [_starts(samples[b, c, sample_order[d]], sizes[d], out[d], kernel[d]) for d in range(n)]
            corner = np.zeros(out, dtype=np.int64)
            for d in range(n):
                shape = [1] * n
                shape[d] = out[d]
                corner = corner + starts[d].reshape(shape) * strides[d]
            positions[b, c] = corner[..., None] + offsets
    index = _C.from_numpy(positions.reshape([batch, channels, -1])).to(x.device)
    windows = x.reshape([batch, channels, -1]).gather(2, index).reshape([batch, channels] + out + [len(offsets)])
    values, which = windows.max(dim=-1)
    indices = _C.from_numpy(positions).to(x.device).gather(-1, which.unsqueeze(-1)).squeeze(-1)
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


@op(function=False, functional=True)
def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,  # noqa: A002
                          _random_samples=None):
    # (PyTorch's 2-d kernel reads a plane's first sample for the width, the second for the height)
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 2,
                                (1, 0))


@op(function=False, functional=True)
def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,  # noqa: A002
                          _random_samples=None):
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 3,
                                (0, 1, 2))
