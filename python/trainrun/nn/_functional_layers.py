"""The layer functions of torch.nn.functional with PyTorch's signatures:
ints or tuples for kernel sizes, strides and paddings, padding="same",
attention with masks, padding modes, interpolation, normalizations. The
C++ kernels do the heavy ones (conv2d, pools, layer_norm); the rest are
composites of core ops. Embedding lookups are in _functional_embedding.py."""
import math

import numpy as np

from trainrun import _C
from trainrun._op_table import op


def _pair(value, where, what):
    """An int or a pair (a 1-tuple counts as that int twice) as a list of two ints."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return [int(value[0])] * 2
        if len(value) != 2:
            raise ValueError(f"{where}(): {what} must be an int or a pair, got {value}")
        return [int(v) for v in value]
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{where}(): {what} must be an int or a pair of ints, got {type(value).__name__}")
    return [int(value)] * 2


def _index(values, device):
    return _C.from_numpy(np.ascontiguousarray(values, dtype=np.int64)).to(device)


@op(function=False, functional=True)
def linear(input, weight, bias=None):  # noqa: A002
    """input @ weight.T + bias. With a bias, a 2-D input, or a contiguous one of more dims seen as rows (PyTorch's
    _flatten_nd_linear), is one addmm: the GEMM adds the bias as it writes, instead of a second pass."""
    if bias is not None and input.ndim == 2:
        return _C.addmm(bias, input, weight.t())
    if bias is not None and input.ndim > 2 and input.is_contiguous() and input.shape[-1] > 0:
        rows = _C.addmm(bias, input.view([-1, input.shape[-1]]), weight.t())
        return rows.view(list(input.shape[:-1]) + [rows.shape[-1]])
    out = _C.matmul(input, weight.t())
    return out + bias if bias is not None else out


@op(function=False, functional=True)
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    stride, dilation = _pair(stride, "conv2d", "stride"), _pair(dilation, "conv2d", "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0, 0]
        elif padding == "same":
            if stride != [1, 1]:
                raise ValueError("conv2d(): padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
            if any(t % 2 for t in total):  # asymmetric: pad the extra row/column at the end, as PyTorch does
                input = pad(input, [0, total[1] % 2, 0, total[0] % 2])  # noqa: A001
            padding = [t // 2 for t in total]
        else:
            raise ValueError(f"conv2d(): padding must be 'valid', 'same', an int or a pair, got {padding!r}")
    else:
        padding = _pair(padding, "conv2d", "padding")
    optional_bias = {"bias": bias} if bias is not None else {}
    return _C.conv2d(input, weight, stride=stride, padding=padding, dilation=dilation, groups=groups, **optional_bias)


@op(function=False, functional=True)
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """A 1-D convolution as a 2-D one over a height of 1."""
    one = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731
    pad_arg = padding if isinstance(padding, str) else (0, one(padding))
    out = conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, one(stride)), pad_arg, (1, one(dilation)),
                 groups)
    return out.squeeze(2)


@op(function=False, functional=True)
def pad(input, pad, mode="constant", value=None):  # noqa: A002
    """Pads the last len(pad)/2 dims: pad = (left, right) of the last dim, then of the one before, ...
    mode: constant (value, default 0; negative pads crop), reflect, replicate or circular."""
    if len(pad) % 2:
        raise ValueError(f"pad(): pad must have an even length, got {len(pad)}")
    if len(pad) // 2 > input.ndim:
        raise ValueError(f"pad(): pad {list(pad)} covers {len(pad) // 2} dims but the input has {input.ndim}")
    out = input
    for i in range(len(pad) // 2):
        d = input.ndim - 1 - i
        left, right = int(pad[2 * i]), int(pad[2 * i + 1])
        if left == 0 and right == 0:
            continue
        n = out.shape[d]
        if mode == "constant":
            if left < 0:
                out, n, left = out.narrow(d, -left, n + left), n + left, 0
            if right < 0:
                out, n, right = out.narrow(d, 0, n + right), n + right, 0
            parts = []
            for width in (left, None, right):
                if width is None:
                    parts.append(out)
                elif width:
                    shape = list(out.shape)
                    shape[d] = width
                    parts.append(_C.full(shape, 0 if value is None else value, dtype=out.dtype, device=out.device))
            out = _C.cat(parts, d)
            continue
        positions = np.arange(-left, n + right)
        if mode == "replicate":
            positions = np.clip(positions, 0, n - 1)
        elif mode == "reflect":
            if left >= n or right >= n:
                raise ValueError(f"pad(): reflect padding ({left}, {right}) must be smaller than the dim ({n})")
            period = 2 * (n - 1)
            positions = np.abs(positions) % period if period else np.zeros_like(positions)
            positions = np.where(positions >= n, period - positions, positions)
        elif mode == "circular":
            positions = positions % n
        else:
            raise ValueError(f"pad(): mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
        out = _C.index_select(out, d, _index(positions, out.device))
    return out


@op(function=False, functional=True)
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):  # noqa: A002
    if out is not None:
        raise NotImplementedError("normalize(out=...) is not supported")
    norm = _C.norm(input, float(p), [dim], True)
    return input / _C.clamp(norm, eps, None).expand(list(input.shape))


def _source_positions(out_size, in_size, scale, align_corners, mode):
    """Where each output position reads from along one dim, as PyTorch's upsampling kernels compute it (bicubic
    positions are not clamped at 0: its taps reach past the edge and are clamped one by one)."""
    dst = np.arange(out_size, dtype=np.float64)
    if mode in ("nearest", "nearest-exact"):
        ratio = (1.0 / scale) if scale else in_size / out_size
        offset = 0.5 if mode == "nearest-exact" else 0.0
        return np.minimum(np.floor((dst + offset) * ratio), in_size - 1).astype(np.int64)
    if align_corners:
        ratio = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        return dst * ratio
    ratio = (1.0 / scale) if scale else in_size / out_size
    positions = (dst + 0.5) * ratio - 0.5
    return positions if mode == "bicubic" else np.maximum(positions, 0.0)


def _cubic_weights(t, a=-0.75):
    """The four taps' weights of PyTorch's cubic convolution (A = -0.75) at fractional offset t."""
    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@op(function=False, functional=True)
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """Resizes the spatial dims (all but batch and channel), one dim after the other: mode nearest, nearest-exact,
    (bi/tri)linear or bicubic, with PyTorch's source-index rules (align_corners, scale_factor)."""
    spatial = input.ndim - 2
    if spatial < 1:
        raise ValueError(f"interpolate(): expected a batched input with channels (3-D or more), got {input.ndim}-D")
    if mode not in ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic"):
        raise NotImplementedError(f"interpolate(mode={mode!r}) is not supported (nearest, nearest-exact, linear, "
                                  "bilinear, trilinear, bicubic)")
    if mode == "bicubic" and spatial != 2:
        raise ValueError(f"interpolate(mode='bicubic') needs a 4-D input, got {input.ndim}-D")
    if antialias:
        raise NotImplementedError("interpolate(antialias=True) is not supported")
    nearest = mode in ("nearest", "nearest-exact")
    if not nearest and align_corners is None:
        align_corners = False
    if nearest and align_corners is not None:
        raise ValueError("interpolate(): align_corners only applies to linear modes")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate(): give exactly one of size and scale_factor")
    if size is not None:
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * spatial
        scales = [None] * spatial
    else:
        scales = list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * spatial
        sizes = [int(math.floor(input.shape[2 + i] * scales[i])) for i in range(spatial)]
        if recompute_scale_factor:
            scales = [None] * spatial
    out = input
    for i in range(spatial):
        d = 2 + i
        n_in, n_out = input.shape[d], sizes[i]
        pos = _source_positions(n_out, n_in, scales[i], align_corners, mode)
        if nearest:
            out = _C.index_select(out, d, _index(pos, out.device))
            continue
        if mode == "bicubic":  # four taps per output, each clamped into the input, weighted and summed
            base = np.floor(pos).astype(np.int64)
            shape = [1] * out.ndim
            shape[d] = n_out
            taps = []
            for k, weight in enumerate(_cubic_weights(pos - base)):
                w = _C.from_numpy(np.ascontiguousarray(weight.astype(np.float32))).to(out.device).to(out.dtype)
                taps.append(_C.index_select(out, d, _index(np.clip(base - 1 + k, 0, n_in - 1), out.device)) *
                            w.reshape(shape))
            out = taps[0] + taps[1] + taps[2] + taps[3]
            continue
        lo = np.minimum(np.floor(pos).astype(np.int64), n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        frac = (pos - lo).astype(np.float32)
        shape = [1] * out.ndim
        shape[d] = n_out
        w = _C.from_numpy(np.ascontiguousarray(frac)).to(out.device).to(out.dtype).reshape(shape)
        a = _C.index_select(out, d, _index(lo, out.device))
        b = _C.index_select(out, d, _index(hi, out.device))
        out = a + (b - a) * w
    return out


@op(function=False, functional=True)
def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    return interpolate(input, size, scale_factor, mode, align_corners)


@op(function=False, functional=True)
def pixel_shuffle(input, upscale_factor):  # noqa: A002
    r = upscale_factor
    *lead, c, h, w = input.shape
    out = input.reshape(lead + [c // (r * r), r, r, h, w])
    k = len(lead)
    out = out.permute(list(range(k)) + [k, k + 3, k + 1, k + 4, k + 2])
    return out.reshape(lead + [c // (r * r), h * r, w * r])


@op(function=False, functional=True)
def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    r = downscale_factor
    *lead, c, h, w = input.shape
    out = input.reshape(lead + [c, h // r, r, w // r, r])
    k = len(lead)
    out = out.permute(list(range(k)) + [k, k + 2, k + 4, k + 1, k + 3])
    return out.reshape(lead + [c * r * r, h // r, w // r])


@op(function=False, functional=True)
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(q k^T * scale + mask) v. attn_mask: bool (True = attend) or float (added); is_causal masks the
    future (the top-left aligned lower triangle, as PyTorch's)."""
    L, S = query.shape[-2], key.shape[-2]
    if enable_gqa and key.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention(): give attn_mask or is_causal, not both")
    if hasattr(attn_mask, "_materialize"):  # (nn.attention.bias.CausalBias)
        attn_mask = attn_mask._materialize(query.device)
    s = (1.0 / math.sqrt(query.shape[-1])) if scale is None else scale
    scores = _C.matmul(query, key.transpose(-2, -1)) * s
    if is_causal:
        future = _C.ones([L, S], dtype=_C.dtype.bool, device=query.device).triu(1)  # (ops: a recording replays it)
        scores = _C.masked_fill(scores, future, float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype == _C.dtype.bool:
            scores = _C.masked_fill(scores, ~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = _C.softmax(scores, -1, None)
    if dropout_p > 0.0:
        weights = _C.dropout(weights, dropout_p, True)
    return _C.matmul(weights, value)


@op(function=False, functional=True)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):  # noqa: A002
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    affine = {k: v for k, v in (("weight", weight), ("bias", bias)) if v is not None}
    return _C.layer_norm(input, shape, eps=eps, **affine)


@op(function=False, functional=True)
def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if eps is None:
        eps = float(np.finfo(np.float64 if input.dtype == _C.dtype.float64 else np.float32).eps)
    dims = list(range(-len(shape), 0))
    out = input * _C.rsqrt((input * input).mean(dim=dims, keepdim=True) + eps)
    return out * weight if weight is not None else out


def _per_channel_affine(out, weight, bias):
    """out * weight + bias, the vectors laid along dim 1 (the channels) of out: the affine of the norms."""
    shape = [1, out.shape[1]] + [1] * (out.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@op(function=False, functional=True)
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):  # noqa: A002
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise ValueError(f"group_norm(): {c} channels do not split into {num_groups} groups")
    x = input.reshape([n, num_groups, -1])
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) * (x - mean)).mean(dim=-1, keepdim=True)
    out = ((x - mean) * _C.rsqrt(var + eps)).reshape(list(input.shape))
    return _per_channel_affine(out, weight, bias)


@op(function=False, functional=True)
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    """Each sample's channels normalised over their positions. With running statistics (PyTorch's way): the
    (N, C, ...) input is a batch norm of one sample with N * C channels, whose running statistics are the given
    ones repeated N times, averaged back over N after the update; use_input_stats=False normalises with them."""
    if running_mean is None and running_var is None:
        if not use_input_stats:
            raise ValueError("Expected running_mean and running_var to be defined when use_input_stats is false")
        return group_norm(input, input.shape[1], weight, bias, eps)
    n, c = input.shape[0], input.shape[1]
    repeated_mean, repeated_var = running_mean.repeat(n), running_var.repeat(n)
    x = input.reshape([1, n * c] + list(input.shape[2:]))
    out = batch_norm(x, repeated_mean, repeated_var, None, None, use_input_stats, momentum, eps).reshape(
        list(input.shape))
    if use_input_stats:
        with _no_grad():
            running_mean.copy_(repeated_mean.reshape([n, c]).mean(0))
            running_var.copy_(repeated_var.reshape([n, c]).mean(0))
    return _per_channel_affine(out, weight, bias)


@op(function=False, functional=True)
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,  # noqa: A002
               momentum=0.1, eps=1e-05):
    """Normalizes over every dim but the channels (dim 1). training: with the batch's statistics, updating
    running_mean/running_var in place (unbiased variance, as PyTorch's); else with the running ones."""
    dims = [0] + list(range(2, input.ndim))
    shape = [1, input.shape[1]] + [1] * (input.ndim - 2)
    if training:
        mean = input.mean(dim=dims)
        var = input.var(dim=dims, unbiased=False)
        if running_mean is not None:
            count = input.numel() // input.shape[1]
            with _no_grad():
                running_mean.copy_(running_mean * (1 - momentum) + mean.detach() * momentum)
                running_var.copy_(running_var * (1 - momentum) + var.detach() * (count / max(count - 1, 1)) *
                                  momentum)
    else:
        mean, var = running_mean, running_var
    # input * scale + shift, one pass (nn/batch_norm.cc says why)
    scale = _C.rsqrt(var.reshape(shape) + eps)
    if weight is not None:
        scale = scale * weight.reshape(shape)
    shift = -(mean.reshape(shape) * scale)
    if bias is not None:
        shift = shift + bias.reshape(shape)
    return _C.addcmul(shift, input, scale)


def _no_grad():
    from trainrun._autograd import no_grad
    return no_grad()


def _single(value, where, name):
    value = value[0] if isinstance(value, (tuple, list)) and len(value) == 1 else value
    if not isinstance(value, int):
        raise TypeError(f"{where}(): {name} must be an int or a 1-tuple, got {value!r}")
    return value


def _as_rows(input, where):  # noqa: A002
    """(N, C, L) or (C, L) as a 2-D pooling input of height 1."""
    if input.dim() not in (2, 3):
        raise ValueError(f"{where}(): expected a 2-D (C, L) or 3-D (N, C, L) input, got shape {list(input.shape)}")
    return input.unsqueeze(-2)


def _zero_stuffed(x, stride):
    """x with stride - 1 zeros between neighbouring elements of each of the last two dims."""
    sh, sw = stride
    n, c, h, w = x.shape
    if sh > 1 or sw > 1:
        x = pad(x.reshape([n, c, h, 1, w, 1]), [0, sw - 1, 0, 0, 0, sh - 1]).reshape([n, c, h * sh, w * sw])
        x = x.narrow(2, 0, (h - 1) * sh + 1).narrow(3, 0, (w - 1) * sw + 1)
    return x


@op(function=False, functional=True)
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """The transpose (input gradient) of conv2d: zeros stuffed between the input's elements, padded by
    dilation * (k - 1) - padding (plus output_padding at the end), convolved with the flipped kernel whose
    in/out channels are swapped per group."""
    s, p = _pair(stride, "conv_transpose2d", "stride"), _pair(padding, "conv_transpose2d", "padding")
    op_, d = _pair(output_padding, "conv_transpose2d", "output_padding"), _pair(dilation, "conv_transpose2d",
                                                                             "dilation")
    if any(o >= max(si, di) for o, si, di in zip(op_, s, d)):
        raise ValueError(f"conv_transpose2d: output_padding {op_} must be smaller than stride {s} or dilation {d}")
    batched = input.ndim == 4
    x = input if batched else input.unsqueeze(0)
    c_in, c_out_g, kh, kw = weight.shape
    if c_in % groups:
        raise ValueError(f"conv_transpose2d: the weight's {c_in} input channels do not split into {groups} groups")
    w = weight.reshape([groups, c_in // groups, c_out_g, kh, kw]).transpose(1, 2)
    w = w.reshape([groups * c_out_g, c_in // groups, kh, kw]).flip(2, 3)
    x = _zero_stuffed(x, s)
    edge = [di * (k - 1) - pi for di, k, pi in zip(d, (kh, kw), p)]
    if any(e < 0 for e in edge):
        x = pad(x, [min(edge[1], 0), min(edge[1], 0), min(edge[0], 0), min(edge[0], 0)])
    x = pad(x, [max(edge[1], 0), max(edge[1], 0) + op_[1], max(edge[0], 0), max(edge[0], 0) + op_[0]])
    out = conv2d(x, w, bias, 1, 0, d, groups)
    return out if batched else out.squeeze(0)


def _patch_positions(hp, wp, k, d, s, where):
    """Flat indices into an (hp, wp) image of every kernel element of every patch, ordered (kH, kW, oh, ow),
    with the patch grid (oh, ow)."""
    oh, ow = (hp - d[0] * (k[0] - 1) - 1) // s[0] + 1, (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{where}: the kernel {k} (dilation {d}) does not fit the padded {hp} x {wp} image")
    rows = np.arange(k[0])[:, None, None, None] * d[0] + np.arange(oh)[None, None, :, None] * s[0]
    cols = np.arange(k[1])[None, :, None, None] * d[1] + np.arange(ow)[None, None, None, :] * s[1]
    return (rows * wp + cols).reshape(-1), oh, ow


def _window_args(where, kernel_size, dilation, padding, stride):
    return (_pair(kernel_size, where, "kernel_size"), _pair(dilation, where, "dilation"),
            _pair(padding, where, "padding"), _pair(stride, where, "stride"))


@op(function=False, functional=True)
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """im2col: every kernel-sized patch as a column, (N, C * kH * kW, L), patches in row-major order (an
    index_select of the padded image, so its gradient adds the overlaps back)."""
    k, d, p, s = _window_args("unfold", kernel_size, dilation, padding, stride)
    if input.ndim != 4:
        raise ValueError(f"unfold: expected a 4-D (N, C, H, W) input, got {input.ndim}-D")
    n, c = input.shape[0], input.shape[1]
    x = pad(input, [p[1], p[1], p[0], p[0]]) if p != [0, 0] else input
    hp, wp = x.shape[2], x.shape[3]
    positions, oh, ow = _patch_positions(hp, wp, k, d, s, "unfold")
    patches = _C.index_select(x.reshape([n, c, hp * wp]), 2, _index(positions, input.device))
    return patches.reshape([n, c * k[0] * k[1], oh * ow])


@op(function=False, functional=True)
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """col2im, unfold's adjoint: columns (N, C * kH * kW, L) summed back into an (N, C, H, W) image."""
    size = _pair(output_size, "fold", "output_size")
    k, d, p, s = _window_args("fold", kernel_size, dilation, padding, stride)
    n, ckk, length = input.shape
    c = ckk // (k[0] * k[1])
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    positions, oh, ow = _patch_positions(hp, wp, k, d, s, "fold")
    if oh * ow != length:
        raise ValueError(f"fold: {length} columns do not match the {oh} x {ow} patches of output_size {size}")
    flat = input.reshape([n, c, k[0] * k[1] * length])
    out = _C.index_add(_C.zeros([n, c, hp * wp], dtype=input.dtype, device=input.device), 2,
                       _index(positions, input.device), flat).reshape([n, c, hp, wp])
    return out[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]


@op(function=False, functional=True)
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002
    """x / (k + alpha/size * sum of x^2 over `size` neighbouring channels)^beta."""
    if input.ndim < 3:
        raise ValueError(f"local_response_norm(): expected 3D or higher input, got {input.ndim}D")
    if input.numel() == 0:
        return input
    squares = (input * input).unsqueeze(1)  # (N, 1, C, ...): average over a window of channels
    n, c = input.shape[0], input.shape[1]
    flat = squares.reshape([n, 1, c, -1])
    padded = pad(flat, [0, 0, size // 2, (size - 1) // 2])
    windows = padded.unfold(2, size, 1).sum(dim=-1) / size  # (N, 1, C, rest)
    div = (windows.reshape(list(input.shape)) * alpha + k) ** beta
    return input / div


@op(function=False, functional=True)
def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = x1 W[o] x2 (+ bias[o]), weight (out, in1, in2)."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise ValueError(f"bilinear(): input1 {list(input1.shape)} and input2 {list(input2.shape)} must agree on "
                         "all dims but the last")
    lead = list(input1.shape[:-1])
    x1 = input1.reshape([-1, input1.shape[-1]])
    x2 = input2.reshape([-1, input2.shape[-1]])
    o, i1, i2 = weight.shape
    partial = _C.matmul(x1, weight.permute(1, 0, 2).reshape([i1, o * i2])).reshape([-1, o, i2])  # x1 W[o]
    out = (partial * x2.unsqueeze(1)).sum(dim=-1)
    if bias is not None:
        out = out + bias
    return out.reshape(lead + [weight.shape[0]])


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    """The deprecated form of interpolate(mode="nearest")."""
    import warnings
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    """The deprecated form of interpolate(mode="bilinear", align_corners=True)."""
    import warnings
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


@op(function=False, functional=True)
def channel_shuffle(input, groups):  # noqa: A002
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise ValueError(f"channel_shuffle(): the number of channels ({c}) must be divisible by groups ({groups})")
    rest = list(input.shape[2:])
    return input.reshape([n, groups, c // groups] + rest).transpose(1, 2).reshape([n, c] + rest)


@op(function=True, functional=True)
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """conv_transpose2d over a height of 1."""
    one = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731
    unbatched = input.dim() == 2
    x = input.unsqueeze(0) if unbatched else input
    out = conv_transpose2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, one(stride)), (0, one(padding)),
                           (0, one(output_padding)), groups, (1, one(dilation))).squeeze(2)
    return out.squeeze(0) if unbatched else out


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """torch.nn.functional.multi_head_attention_forward: MultiheadAttention's computation with its weights passed
    in ((seq, batch, embed) inputs, or unbatched (seq, embed)); the module's forward runs over them."""
    import types
    from trainrun.nn._layers import MultiheadAttention
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward(static_k=..., static_v=...) is not supported")
    embed_dim = query.shape[-1]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    if embed_dim % num_heads:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight and (q_proj_weight is None or k_proj_weight is None or v_proj_weight is None):
        raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight "
                             "is None")
    weights = types.SimpleNamespace(
        embed_dim=embed_dim, num_heads=num_heads, head_dim=embed_dim // num_heads, batch_first=False,
        _qkv_same_embed_dim=not use_separate_proj_weight, in_proj_weight=in_proj_weight,
        q_proj_weight=q_proj_weight, k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight,
        in_proj_bias=in_proj_bias, bias_k=bias_k, bias_v=bias_v, add_zero_attn=add_zero_attn, dropout=dropout_p,
        training=training, out_proj=lambda x: linear(x, out_proj_weight, out_proj_bias))
    return MultiheadAttention.forward(weights, query, key, value, key_padding_mask, need_weights, attn_mask,
                                      average_attn_weights, is_causal)
