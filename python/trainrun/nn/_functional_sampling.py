"""Spatial transformers of torch.nn.functional: affine_grid (the sampling grid of an affine map) and grid_sample
(an image read at a grid's points: bilinear or nearest, zeros/border/reflection padding, align_corners), as
composites of gathers, so both differentiate through input and grid. Coordinates follow PyTorch's kernels:
-1 and 1 are the centres of the corner pixels with align_corners=True, their outer edges without."""
import numpy as np

from trainrun import _C
from trainrun._op_table import op


def _base(steps, align_corners, like):
    """PyTorch's normalized coordinates of `steps` pixels along one dim."""
    if steps <= 1:
        values = np.zeros(max(steps, 0), dtype=np.float64)
    else:
        values = np.linspace(-1.0, 1.0, steps)
        if not align_corners:
            values = values * (steps - 1) / steps
    return _C.from_numpy(values.astype(np.float32)).to(device=like.device, dtype=like.dtype)


@op(function=False, functional=True)
def affine_grid(theta, size, align_corners=None):
    """The (N, H, W, 2) grid (or (N, D, H, W, 3)) that theta (N, 2, 3) (or (N, 3, 4)) maps the output's pixel
    coordinates to: each output point's (x, y[, z]) place in the input."""
    align_corners = bool(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"affine_grid(): expected theta to have floating point type, got {theta.dtype}")
    size = [int(v) for v in size]
    if len(size) == 4:
        if list(theta.shape[1:]) != [2, 3] or theta.shape[0] != size[0]:
            raise ValueError(f"affine_grid(): expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{size}, got {list(theta.shape)}")
        n, _, h, w = size
        xs = _base(w, align_corners, theta).reshape([1, w]).expand([h, w])
        ys = _base(h, align_corners, theta).reshape([h, 1]).expand([h, w])
        points = _C.stack([xs, ys, xs * 0 + 1], -1).reshape([1, h * w, 3])
        return _C.matmul(points, theta.transpose(1, 2)).reshape([n, h, w, 2])
    if len(size) == 5:
        if list(theta.shape[1:]) != [3, 4] or theta.shape[0] != size[0]:
            raise ValueError(f"affine_grid(): expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{size}, got {list(theta.shape)}")
        n, _, d, h, w = size
        xs = _base(w, align_corners, theta).reshape([1, 1, w]).expand([d, h, w])
        ys = _base(h, align_corners, theta).reshape([1, h, 1]).expand([d, h, w])
        zs = _base(d, align_corners, theta).reshape([d, 1, 1]).expand([d, h, w])
        points = _C.stack([xs, ys, zs, xs * 0 + 1], -1).reshape([1, d * h * w, 4])
        return _C.matmul(points, theta.transpose(1, 2)).reshape([n, d, h, w, 3])
    raise NotImplementedError(f"affine_grid(): only 4-D and 5-D sizes are supported, got {size}")


def _reflect(coord, twice_low, twice_high):
    """PyTorch's reflect_coordinates: coord folded back into [low, high] as many times as it takes."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    coord = (coord - low).abs()
    flips = _C.floor(coord / span).detach()
    extra = coord - flips * span
    even = _C.remainder(flips, 2.0) == 0
    return _C.where(even, extra + low, span - extra + low)


def _source_index(coord, size, padding_mode, align_corners):
    """A normalized grid coordinate as a pixel index into a dim of `size` pixels, padding applied."""
    coord = (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2
    if padding_mode == "border":
        coord = _C.clamp(coord, 0.0, float(size - 1))
    elif padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
        coord = _C.clamp(coord, 0.0, float(size - 1))
    return coord


def _read(flat, ix, iy, width, height):
    """flat (N, C, H*W) at integer pixels (ix, iy) (N, Ho, Wo), 0 outside the image."""
    n, c = flat.shape[0], flat.shape[1]
    inside = (ix >= 0) & (ix < width) & (iy >= 0) & (iy < height)
    index = (_C.clamp(iy, 0, height - 1) * width + _C.clamp(ix, 0, width - 1)).to(_C.dtype.int64)
    positions = index.reshape([n, 1, -1]).expand([n, c, index[0].numel()])
    values = flat.gather(2, positions).reshape([n, c] + list(ix.shape[1:]))
    return values * inside.unsqueeze(1).to(flat.dtype)


@op(function=False, functional=True)
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):  # noqa: A002
    """input (N, C, H, W) read at grid (N, Ho, Wo, 2) (x, then y, in [-1, 1]): an (N, C, Ho, Wo) result."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample(mode='bicubic') is not supported (bilinear, nearest)")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise NotImplementedError(f"grid_sample(): only 4-D inputs with (N, H, W, 2) grids are supported, got input "
                                  f"{list(input.shape)} and grid {list(grid.shape)}")
    if grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sample(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    align_corners = bool(align_corners)
    n, c, height, width = input.shape
    ix = _source_index(grid[..., 0], width, padding_mode, align_corners)
    iy = _source_index(grid[..., 1], height, padding_mode, align_corners)
    flat = input.reshape([n, c, height * width])
    if mode == "nearest":
        return _read(flat, _C.round(ix).detach(), _C.round(iy).detach(), width, height)
    x0, y0 = _C.floor(ix).detach(), _C.floor(iy).detach()
    wx1, wy1 = ix - x0, iy - y0
    wx0, wy0 = 1 - wx1, 1 - wy1
    out = _read(flat, x0, y0, width, height) * (wx0 * wy0).unsqueeze(1)
    out = out + _read(flat, x0 + 1, y0, width, height) * (wx1 * wy0).unsqueeze(1)
    out = out + _read(flat, x0, y0 + 1, width, height) * (wx0 * wy1).unsqueeze(1)
    return out + _read(flat, x0 + 1, y0 + 1, width, height) * (wx1 * wy1).unsqueeze(1)
