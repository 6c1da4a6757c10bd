"""The volumetric layer functions of torch.nn.functional (conv3d, max_pool3d, avg_pool3d, adaptive_avg_pool3d,
adaptive_max_pool3d) as compositions of the 2-D kernels: a 3-D convolution is the sum over the kernel's depth
taps of 2-D convolutions of the depth slices each tap reads (one batched conv2d per tap); the pools are
separable, so the 2-D pool over height and width is followed by the 1-D one over depth. Gradients come from
the ops used."""
from trainrun import _C
from trainrun._op_table import op


def _triple(value, where, what):
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return [int(value[0])] * 3
        if len(value) != 3:
            raise ValueError(f"{where}(): {what} must be an int or a triple, got {value}")
        return [int(v) for v in value]
    return [int(value)] * 3


def _batched(input, where):  # noqa: A002
    if input.dim() == 4:
        return input.unsqueeze(0), True
    if input.dim() != 5:
        raise ValueError(f"{where}(): expected a 4-D (unbatched) or 5-D input, got {input.dim()}-D")
    return input, False


def _pad(x, pads, value=0.0):
    from trainrun.nn._functional_layers import pad
    return pad(x, pads, value=value) if any(pads) else x


def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


@op(function=True, functional=True)
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    from trainrun.nn._functional_layers import conv2d
    x, unbatched = _batched(input, "conv3d")
    s, d = _triple(stride, "conv3d", "stride"), _triple(dilation, "conv3d", "dilation")
    k = list(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            p = [0, 0, 0]
        elif padding == "same":
            if s != [1, 1, 1]:
                raise ValueError("conv3d(): padding='same' is not supported for strided convolutions")
            totals = [dd * (kk - 1) for dd, kk in zip(d, k)]
            x = _pad(x, [totals[2] // 2, totals[2] - totals[2] // 2, totals[1] // 2, totals[1] - totals[1] // 2,
                         totals[0] // 2, totals[0] - totals[0] // 2])
            p = [0, 0, 0]
        else:
            raise ValueError(f"conv3d(): padding must be 'valid', 'same' or ints, got {padding!r}")
    else:
        p = _triple(padding, "conv3d", "padding")
    if x.shape[1] != weight.shape[1] * groups:
        raise ValueError(f"conv3d(): input has {x.shape[1]} channels, weight {list(weight.shape)} with groups="
                         f"{groups} expects {weight.shape[1] * groups}")
    x = _pad(x, [0, 0, 0, 0, p[0], p[0]])  # depth padding here; height and width by conv2d
    n, c, depth = x.shape[0], x.shape[1], x.shape[2]
    out_depth = _out_size(depth, k[0], s[0], 0, d[0])
    if out_depth <= 0:
        raise ValueError(f"conv3d(): the kernel's depth {k[0]} (dilation {d[0]}) is larger than the padded input's "
                         f"depth {depth}")
    total = None
    for tap in range(k[0]):
        start = tap * d[0]
        slices = x[:, :, start:start + s[0] * (out_depth - 1) + 1:s[0]]  # (N, C, out_depth, H, W)
        flat = slices.permute(0, 2, 1, 3, 4).reshape([n * out_depth, c, x.shape[3], x.shape[4]])
        y = conv2d(flat, weight[:, :, tap], None, s[1:], p[1:], d[1:], groups)
        total = y if total is None else total + y
    out = total.reshape([n, out_depth] + list(total.shape[1:])).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape([1, -1, 1, 1, 1])
    return out.squeeze(0) if unbatched else out


def _pool_depth(x, k, s, p, reduce, fill):
    """Pools dim 2 (depth) of a 5-D tensor with windows of k every s, padded by p with `fill`."""
    x = _pad(x, [0, 0, 0, 0, p, p], fill)
    windows = x.unfold(2, k, s)  # (N, C, D', H, W, k)
    return windows.amax(dim=-1) if reduce == "max" else windows.mean(dim=-1)


def _pool3d(input, kernel_size, stride, padding, pool2d, reduce, fill, where):  # noqa: A002
    """The 2-D pool over each depth slice's height and width, then windows over depth (reduce: max or mean)."""
    x, unbatched = _batched(input, where)
    k = _triple(kernel_size, where, "kernel_size")
    s = k if stride is None or stride == [] else _triple(stride, where, "stride")
    p = _triple(padding, where, "padding")
    n, c, depth = x.shape[0], x.shape[1], x.shape[2]
    planes = pool2d(x.reshape([n, c * depth, x.shape[3], x.shape[4]]), k[1:], s[1:], p[1:])
    planes = planes.reshape([n, c, depth, planes.shape[2], planes.shape[3]])
    out = _pool_depth(planes, k[0], s[0], p[0], reduce, fill)
    return out.squeeze(0) if unbatched else out


@op(function=True, functional=True)
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    from trainrun.nn._functional_pooling import max_pool2d
    if return_indices or ceil_mode or _triple(dilation, "max_pool3d", "dilation") != [1, 1, 1]:
        from trainrun.nn._functional_pooling_indices import max_pool3d_with_indices
        return max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
    return _pool3d(input, kernel_size, stride, padding, max_pool2d, "max", float("-inf"), "max_pool3d")


@op(function=True, functional=True)
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    from trainrun.nn._functional_pooling import avg_pool2d
    if ceil_mode or not count_include_pad or divisor_override is not None:
        raise NotImplementedError("avg_pool3d(): ceil_mode, count_include_pad=False and divisor_override are not "
                                  "supported")
    return _pool3d(input, kernel_size, stride, padding, avg_pool2d, "mean", 0.0, "avg_pool3d")


def _adaptive3d(input, output_size, pool2d, pool1d, where):  # noqa: A002
    x, unbatched = _batched(input, where)
    size = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size] * 3
    n, c, depth, height, width = x.shape
    size = [dim if want is None else want for want, dim in zip(size, (depth, height, width))]
    planes = pool2d(x.reshape([n, c * depth, height, width]), (size[1], size[2]))  # (N, C*D, oh, ow)
    planes = planes.reshape([n, c, depth, size[1] * size[2]]).permute(0, 1, 3, 2)
    columns = pool1d(planes.reshape([n, c * size[1] * size[2], depth]), size[0])  # (N, C*oh*ow, od)
    out = columns.reshape([n, c, size[1], size[2], size[0]]).permute(0, 1, 4, 2, 3)
    return out.squeeze(0) if unbatched else out


@op(function=True, functional=True)
def adaptive_avg_pool3d(input, output_size):  # noqa: A002
    from trainrun.nn._functional_pooling import adaptive_avg_pool1d, adaptive_avg_pool2d
    return _adaptive3d(input, output_size, adaptive_avg_pool2d, adaptive_avg_pool1d, "adaptive_avg_pool3d")


@op(function=True, functional=True)
def adaptive_max_pool3d(input, output_size, return_indices=False):  # noqa: A002
    from trainrun.nn._functional_pooling import adaptive_max_pool2d
    if return_indices:
        from trainrun.nn._functional_pooling_indices import adaptive_max_pool_with_indices
        return adaptive_max_pool_with_indices(input, output_size, 3, "adaptive_max_pool3d")

    def max1d(x, size):
        return adaptive_max_pool2d(x.unsqueeze(-2), (1, size)).squeeze(-2)
    return _adaptive3d(input, output_size, adaptive_max_pool2d, max1d, "adaptive_max_pool3d")


def _zero_stuffed_along(x, dim, s):
    """s - 1 zeros between neighbours along dim (the stride of a transposed convolution)."""
    if s == 1:
        return x
    from trainrun.nn._functional_layers import pad
    x = x.movedim(dim, -1)
    size = x.shape[-1]
    x = pad(x.unsqueeze(-1), [0, s - 1]).reshape(list(x.shape[:-1]) + [size * s]).narrow(-1, 0, (size - 1) * s + 1)
    return x.movedim(-1, dim)


@op(function=True, functional=True)
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """The transpose (input gradient) of conv3d, as conv_transpose2d builds its own: zeros stuffed between the
    input's elements, padded by dilation * (k - 1) - padding (plus output_padding at the end), convolved with the
    flipped kernel whose in/out channels are swapped per group."""
    s, p = _triple(stride, "conv_transpose3d", "stride"), _triple(padding, "conv_transpose3d", "padding")
    extra, d = _triple(output_padding, "conv_transpose3d", "output_padding"), \
        _triple(dilation, "conv_transpose3d", "dilation")
    if any(o >= max(si, di) for o, si, di in zip(extra, s, d)):
        raise ValueError(f"conv_transpose3d: output_padding {extra} must be smaller than stride {s} or dilation {d}")
    x, unbatched = _batched(input, "conv_transpose3d")
    c_in, c_out_g = weight.shape[0], weight.shape[1]
    k = list(weight.shape[2:])
    if c_in % groups or x.shape[1] != c_in:
        raise ValueError(f"conv_transpose3d: input has {x.shape[1]} channels, the weight {list(weight.shape)} "
                         f"with groups={groups} expects {c_in}")
    w = weight.reshape([groups, c_in // groups, c_out_g] + k).transpose(1, 2)
    w = w.reshape([groups * c_out_g, c_in // groups] + k).flip(2, 3, 4)
    for axis in range(3):
        x = _zero_stuffed_along(x, 2 + axis, s[axis])
    edge = [di * (kk - 1) - pi for di, kk, pi in zip(d, k, p)]
    pads = []
    for axis in (2, 1, 0):  # (pad's order: the last dim first)
        pads += [edge[axis], edge[axis] + extra[axis]]
    from trainrun.nn._functional_layers import pad
    x = pad(x, pads)
    out = conv3d(x, w, bias, 1, 0, d, groups)
    return out.squeeze(0) if unbatched else out
