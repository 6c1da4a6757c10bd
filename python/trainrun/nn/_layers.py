"""Layers written in Python over the functional forms: MultiheadAttention,
GroupNorm, Conv1d, PReLU, adaptive pools, Upsample, PixelShuffle, padding
layers, Unflatten, Identity. Parameter names, shapes and initialization
follow PyTorch's, so state_dicts load across."""
import math

from trainrun import _C
from trainrun.nn import functional as F
from trainrun.nn import init
from trainrun.nn._module import Module
from trainrun.nn.parameter import Parameter


class Identity(Module):
    """Returns its input (takes and ignores any constructor arguments, as PyTorch's)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):  # noqa: A002
        return input


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):  # noqa: A002
        return input.unflatten(self.dim, self.unflattened_size)


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-05, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(_C.ones([num_channels], dtype=dtype, device=device))
            self.bias = Parameter(_C.zeros([num_channels], dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):  # noqa: A002
        w, b = (self.weight, self.bias) if self.affine else (None, None)
        return F.group_norm(input, self.num_groups, w, b, self.eps)


class Conv1d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], but got "
                             f"padding_mode='{padding_mode}'")
        k = kernel_size[0] if isinstance(kernel_size, (tuple, list)) else kernel_size
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (k,)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.padding_mode = padding_mode
        self.weight = Parameter(_C.empty([out_channels, in_channels // groups, k], dtype=dtype, device=device))
        bound = 1.0 / math.sqrt(in_channels // groups * k)  # kaiming_uniform_(a=sqrt(5)), PyTorch's default
        init.uniform_(self.weight, -bound, bound)
        if bias:
            self.bias = Parameter(_C.empty([out_channels], dtype=dtype, device=device))
            init.uniform_(self.bias, -bound, bound)
        else:
            object.__setattr__(self, "bias", None)

    def forward(self, input):  # noqa: A002
        if self.padding_mode != "zeros":  # padded that way first, as PyTorch's _conv_forward; the conv pads nothing
            return F.conv1d(F.pad(input, _mode_padding(self.padding, self.kernel_size, self.dilation, 1),
                                  mode=self.padding_mode), self.weight, self.bias, self.stride, 0, self.dilation,
                            self.groups)
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


def _mode_padding(padding, kernel_size, dilation, dims):
    """F.pad's amounts (last dim first, both sides) for a convolution's padding: ints, or 'same'/'valid'."""
    def per_dim(value):
        return list(value) if isinstance(value, (tuple, list)) else [value] * dims
    sizes, dilations = per_dim(kernel_size), per_dim(dilation)
    if padding == "valid":
        pairs = [(0, 0)] * dims
    elif padding == "same":
        totals = [d * (k - 1) for d, k in zip(dilations, sizes)]
        pairs = [(t // 2, t - t // 2) for t in totals]
    else:
        pairs = [(p, p) for p in per_dim(padding)]
    return [amount for pair in reversed(pairs) for amount in pair]


class PReLU(Module):
    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(_C.full([num_parameters], init, dtype=dtype, device=device))

    def forward(self, input):  # noqa: A002
        return F.prelu(input, self.weight)


def _option_module(name, function, *option_names):
    """A parameter-free layer that stores its options and passes them on."""
    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        values = dict(zip(option_names, args))
        values.update(kwargs)
        for n in option_names:
            setattr(self, n, values.get(n))

    def forward(self, input):  # noqa: A002
        return function(input, *(getattr(self, n) for n in option_names))
    return type(name, (Module,), {"__init__": __init__, "forward": forward, "__module__": "trainrun.nn"})


AdaptiveAvgPool2d = _option_module("AdaptiveAvgPool2d", F.adaptive_avg_pool2d, "output_size")
AdaptiveMaxPool2d = _option_module("AdaptiveMaxPool2d", F.adaptive_max_pool2d, "output_size")
AdaptiveMaxPool1d = _option_module("AdaptiveMaxPool1d", F.adaptive_max_pool1d, "output_size")
AdaptiveAvgPool1d = _option_module("AdaptiveAvgPool1d", F.adaptive_avg_pool1d, "output_size")
PixelShuffle = _option_module("PixelShuffle", F.pixel_shuffle, "upscale_factor")
PixelUnshuffle = _option_module("PixelUnshuffle", F.pixel_unshuffle, "downscale_factor")
Upsample = _option_module("Upsample", F.interpolate, "size", "scale_factor", "mode", "align_corners")
_upsample_init = Upsample.__init__


def _upsample_defaults(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                       recompute_scale_factor=None):
    _upsample_init(self, size, scale_factor, mode, align_corners)


Upsample.__init__ = _upsample_defaults


class _Pad(Module):
    mode, dims = "constant", 2

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * (2 * self.dims)
        self.value = value

    def forward(self, input):  # noqa: A002
        return F.pad(input, list(self.padding), self.mode, self.value if self.mode == "constant" else None)


def _pad_class(name, mode, dims, has_value):
    if has_value:  # ConstantPadNd(padding, value), as PyTorch's (value by keyword too)
        def __init__(self, padding, value):
            _Pad.__init__(self, padding, value)
    else:
        def __init__(self, padding):
            _Pad.__init__(self, padding)
    return type(name, (_Pad,), {"mode": mode, "dims": dims, "__init__": __init__, "__module__": "trainrun.nn"})


ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2, False)
ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1, True)
ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2, True)
ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1, False)
ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2, False)
ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1, False)
ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2, False)
ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1, False)
ZeroPad3d = _pad_class("ZeroPad3d", "constant", 3, False)
ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3, True)
ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3, False)
ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3, False)
CircularPad1d = _pad_class("CircularPad1d", "circular", 1, False)
CircularPad2d = _pad_class("CircularPad2d", "circular", 2, False)
CircularPad3d = _pad_class("CircularPad3d", "circular", 3, False)


class NonDynamicallyQuantizableLinear(Module):
    """MultiheadAttention's output projection (PyTorch's NonDynamicallyQuantizableLinear): weight and bias."""

    def __init__(self, embed_dim, bias, device, dtype):
        super().__init__()
        # nn.Linear's initialisation, draw for draw (MultiheadAttention then zeroes the bias, as PyTorch's)
        self.weight = Parameter(init.kaiming_uniform_(_C.empty([embed_dim, embed_dim], dtype=dtype, device=device),
                                                      a=math.sqrt(5)))
        if bias:
            bound = 1.0 / math.sqrt(embed_dim)
            self.bias = Parameter(init.uniform_(_C.empty([embed_dim], dtype=dtype, device=device), -bound, bound))
        else:
            object.__setattr__(self, "bias", None)

    def forward(self, input):  # noqa: A002
        return F.linear(input, self.weight, self.bias)


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention: packed in_proj_weight/in_proj_bias, out_proj; forward(query, key, value,
    key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False)
    returns (output, weights or None). Masks: bool True = not allowed, or float added to the scores."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim

        def empty(*shape):
            return Parameter(_C.empty(list(shape), dtype=dtype, device=device))
        if self._qkv_same_embed_dim:  # one packed matrix, as PyTorch's
            self.in_proj_weight = empty(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:  # keys and values of other sizes: a matrix each
            self.q_proj_weight = empty(embed_dim, embed_dim)
            self.k_proj_weight = empty(embed_dim, self.kdim)
            self.v_proj_weight = empty(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = empty(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, bias, device, dtype)
        if add_bias_kv:  # a learned key and value appended to every sequence
            self.bias_k, self.bias_v = empty(1, 1, embed_dim), empty(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        """PyTorch's initialisation, in its order (after out_proj's own): Xavier-uniform projections, zero biases,
        Xavier-normal bias_k and bias_v. The same seed gives PyTorch's weights."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        if not batched:  # (L, E) -> (L, 1, E)
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        # The projections run on the inputs in their own layout, (seq, batch, E) or (batch, seq, E): a contiguous
        # input is one GEMM with its bias (no transposed copy of it first), and the output comes back in that
        # layout directly.
        seq_dim = 1 if batched and self.batch_first else 0
        L, N, E = query.shape[seq_dim], query.shape[1 - seq_dim], query.shape[2]
        S = key.shape[seq_dim]
        H, D = self.num_heads, self.head_dim
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = self.in_proj_weight.chunk(3, 0)
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        b_q, b_k, b_v = self.in_proj_bias.chunk(3, 0) if self.in_proj_bias is not None else (None, None, None)

        def heads(p, n):  # a projection as (N * H, n, D), contiguous: the batched GEMMs' best operand
            p = p.reshape([N, n, H, D]).permute(0, 2, 1, 3) if seq_dim == 1 else \
                p.reshape([n, N, H, D]).permute(1, 2, 0, 3)
            return p.reshape([N * H, n, D])

        def appended(p, row):  # one more position along the sequence: row (1, 1, E) for every batch entry
            return _C.cat([p, row.expand([N, 1, E] if seq_dim == 1 else [1, N, E])], seq_dim)

        q = heads(F.linear(query, w_q, b_q), L) * (1.0 / math.sqrt(D))  # (scaled first, as PyTorch does)
        k_proj, v_proj = F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
        if self.bias_k is not None:
            k_proj, v_proj = appended(k_proj, self.bias_k), appended(v_proj, self.bias_v)
            S += 1
            attn_mask = F.pad(attn_mask, [0, 1]) if attn_mask is not None else None
            key_padding_mask = F.pad(key_padding_mask, [0, 1]) if key_padding_mask is not None else None
        k, v = heads(k_proj, S), heads(v_proj, S)
        if self.add_zero_attn:  # a zero key and value every query can attend to
            zeros = _C.zeros([N * H, 1, D], dtype=k.dtype, device=k.device)
            k, v = _C.cat([k, zeros], 1), _C.cat([v, zeros], 1)
            S += 1
            attn_mask = F.pad(attn_mask, [0, 1]) if attn_mask is not None else None
            key_padding_mask = F.pad(key_padding_mask, [0, 1]) if key_padding_mask is not None else None
        scores = _C.bmm(q, k.transpose(1, 2)).view([N, H, L, S])
        if is_causal and attn_mask is None:
            attn_mask = _C.ones([L, S], dtype=_C.dtype.bool).triu(1)
        if attn_mask is not None:
            mask = attn_mask if attn_mask.ndim == 2 else attn_mask.reshape([N, H, L, S])
            if mask.dtype == _C.dtype.bool:
                scores = _C.masked_fill(scores, mask, float("-inf"))
            else:
                scores = scores + mask
        if key_padding_mask is not None:
            pad = key_padding_mask.reshape([N, 1, 1, S])
            if pad.dtype == _C.dtype.bool:
                scores = _C.masked_fill(scores, pad, float("-inf"))
            else:
                scores = scores + pad
        weights = _C.softmax(scores, -1, None)
        if self.dropout > 0.0 and self.training:
            weights = F.dropout(weights, self.dropout, True)
        out = _C.bmm(weights.reshape([N * H, L, S]), v).view([N, H, L, D])
        out = out.permute(0, 2, 1, 3).reshape([N, L, E]) if seq_dim == 1 else \
            out.permute(2, 0, 1, 3).reshape([L, N, E])
        out = self.out_proj(out)
        if not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        w = weights.mean(dim=1) if average_attn_weights else weights
        return out, (w.squeeze(0) if not batched else w)


class ConvTranspose2d(Module):
    """PyTorch's ConvTranspose2d: weight (in_channels, out_channels // groups, kH, kW), its default init."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        from trainrun.nn._conv_pool_layers import transposed_parameters
        if padding_mode != "zeros":
            raise NotImplementedError("ConvTranspose2d: only padding_mode='zeros' is supported")
        k = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size, kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, tuple(k)
        self.stride, self.padding, self.output_padding = stride, padding, output_padding
        self.groups, self.dilation = groups, dilation
        transposed_parameters(self, in_channels, out_channels, tuple(k), groups, bias, device, dtype)

    def forward(self, input, output_size=None):  # noqa: A002
        from trainrun.nn._conv_pool_layers import transposed_output_padding
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  transposed_output_padding(self, input, output_size, 2), self.groups, self.dilation)


Unfold = _option_module("Unfold", F.unfold, "kernel_size", "dilation", "padding", "stride")
Fold = _option_module("Fold", F.fold, "output_size", "kernel_size", "dilation", "padding", "stride")
_unfold_init, _fold_init = Unfold.__init__, Fold.__init__
Unfold.__init__ = lambda self, kernel_size, dilation=1, padding=0, stride=1: _unfold_init(
    self, kernel_size, dilation, padding, stride)
Fold.__init__ = lambda self, output_size, kernel_size, dilation=1, padding=0, stride=1: _fold_init(
    self, output_size, kernel_size, dilation, padding, stride)


class EmbeddingBag(Module):
    """Bags of embeddings reduced by sum, mean or max (F.embedding_bag); forward(input, offsets=None,
    per_sample_weights=None). The weight starts N(0, 1), its padding row at zero."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("EmbeddingBag: max_norm, scale_grad_by_freq and sparse are not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"EmbeddingBag: padding_idx {padding_idx} is out of range for {num_embeddings} "
                                 "embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.mode, self.include_last_offset, self.padding_idx = mode, include_last_offset, padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, False, False
        if _weight is None:
            self.weight = Parameter(_C.empty([num_embeddings, embedding_dim]))
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise ValueError("EmbeddingBag: shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight)
        if dtype is not None:
            self.to(dtype)
        if device is not None:
            self.to(device)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with _no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input, offsets=None, per_sample_weights=None):  # noqa: A002
        return F.embedding_bag(input, self.weight, offsets, mode=self.mode, per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset, padding_idx=self.padding_idx)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}" + (
            f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        if embeddings.dim() != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings, include_last_offset,
                  padding_idx)
        bag.weight.requires_grad = not freeze
        return bag


def _no_grad():
    from trainrun._autograd import no_grad
    return no_grad()


class MaxPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride if stride is not None else kernel_size, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input):  # noqa: A002
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size, self.stride = (kernel_size,), (stride if stride is not None else kernel_size,)
        self.padding, self.ceil_mode, self.count_include_pad = (padding,), ceil_mode, count_include_pad

    def forward(self, input):  # noqa: A002
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _LPPoolNd(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def extra_repr(self):
        return f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, " \
               f"ceil_mode={self.ceil_mode}"


class LPPool1d(_LPPoolNd):
    def forward(self, input):  # noqa: A002
        return F.lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    def forward(self, input):  # noqa: A002
        return F.lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool3d(_LPPoolNd):
    def forward(self, input):  # noqa: A002
        return F.lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W) inputs."""

    def forward(self, input):  # noqa: A002
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input with 3 or 4 dimensions, got {input.dim()}")
        return F.softmax(input, -3)


class _InstanceNorm(Module):
    """Each sample's channels normalised over their spatial positions (affine and running statistics off by
    default, as PyTorch's); an unbatched input (C, *spatial) is taken too."""

    _spatial = 1

    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum, self.affine = num_features, eps, momentum, affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(_C.ones([num_features], dtype=dtype, device=device))
            self.bias = Parameter(_C.zeros([num_features], dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _C.zeros([num_features], dtype=dtype, device=device))
            self.register_buffer("running_var", _C.ones([num_features], dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", _C.zeros([], dtype=_C.dtype.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)

    def forward(self, input):  # noqa: A002
        batched = input.dim() == self._spatial + 2
        if not batched and input.dim() != self._spatial + 1:
            raise ValueError(f"{type(self).__name__}: expected {self._spatial + 1}D (unbatched) or "
                             f"{self._spatial + 2}D (batched) input, got {input.dim()}D")
        x = input if batched else input.unsqueeze(0)
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels, got {x.shape[1]}")
        w, b = (self.weight, self.bias) if self.affine else (None, None)
        # (num_batches_tracked stays as loaded: PyTorch's instance norms never count batches)
        out = F.instance_norm(x, self.running_mean, self.running_var, w, b,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out if batched else out.squeeze(0)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, " \
               f"track_running_stats={self.track_running_stats}"


class InstanceNorm1d(_InstanceNorm):
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    _spatial = 3


class Bilinear(Module):
    """y = x1^T W x2 + b: weight (out_features, in1_features, in2_features), PyTorch's init
    (U(-1/sqrt(in1_features), 1/sqrt(in1_features)) for weight and bias)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        bound = 1.0 / math.sqrt(in1_features)
        self.weight = Parameter(init.uniform_(_C.empty([out_features, in1_features, in2_features], dtype=dtype,
                                                       device=device), -bound, bound))
        if bias:
            self.bias = Parameter(init.uniform_(_C.empty([out_features], dtype=dtype, device=device), -bound, bound))
        else:
            self.register_parameter("bias", None)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
