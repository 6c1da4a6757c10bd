"""The C++ layers under PyTorch's constructor signatures: sizes as ints or
pairs, padding "same"/"valid", device= and dtype=, Embedding's padding_idx,
LayerNorm's elementwise_affine, the pools' dilation and ceil_mode. Forward
runs in C++ (one call, no Python frame) unless an option needs Python."""
import contextlib

from trainrun import _C
from trainrun._autograd import no_grad
from trainrun.nn import functional as F
from trainrun.nn._functional_layers import _pair
from trainrun.nn._module_copy import remember_init_args


def _built_on(device):
    """Where the C++ constructor makes the parameters: device= (`with trainrun.device(...)`), else the
    default device, so device="meta" allocates nothing."""
    return contextlib.nullcontext() if device is None else _C.device(str(device) if not isinstance(device, int)
                                                                      else f"cuda:{device}")


def _place(module, device, dtype):
    if dtype is not None:
        module.to(dtype)
    if device is not None:
        module.to(device)


def _absent(module, *names):
    """Registers as None the optional parameters the C++ layer was built without (Linear(bias=False).bias is
    None in PyTorch, not a missing attribute)."""
    present = {name for name, _ in module._named_local_parameters(False)}
    for name in names:
        if name not in present:
            module.register_parameter(name, None)


def _uniform_fan_in(module, fan_in):
    """PyTorch's default init of Linear and Conv: kaiming_uniform_(a=sqrt(5)) on the weight, which is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for the bias."""
    import math

    from trainrun.nn import init
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    for name, _ in module._named_local_parameters(False):
        init.uniform_(getattr(module, name), -bound, bound)  # a sharded parameter: its DTensor


@remember_init_args
class Linear(_C.nn.Linear):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        with _built_on(device):
            super().__init__(in_features, out_features, bias)
        _absent(self, "bias")
        _place(self, device, dtype)

    def reset_parameters(self):
        _uniform_fan_in(self, self.in_features)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, " \
               f"bias={'bias' in dict(self._named_local_parameters(False))}"


@remember_init_args
class Conv2d(_C.nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        where = "Conv2d"
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], but got "
                             f"padding_mode='{padding_mode}'")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{where}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        k, s, d = _pair(kernel_size, where, "kernel_size"), _pair(stride, where, "stride"), \
            _pair(dilation, where, "dilation")
        if isinstance(padding, str):
            if padding == "valid":
                p = [0, 0]
            elif padding == "same":
                if s != [1, 1]:
                    raise ValueError(f"{where}: padding='same' is not supported for strided convolutions")
                total = [di * (ki - 1) for di, ki in zip(d, k)]
                if any(t % 2 for t in total):
                    raise NotImplementedError(f"{where}: padding='same' with an even kernel needs asymmetric "
                                              "padding; use F.conv2d(..., padding='same')")
                p = [t // 2 for t in total]
            else:
                raise ValueError(f"{where}: padding must be 'same', 'valid', an int or a pair, got {padding!r}")
        else:
            p = _pair(padding, where, "padding")
        # Another padding mode: the input is padded that way first, and the convolution pads nothing.
        object.__setattr__(self, "padding_mode", padding_mode)
        object.__setattr__(self, "_mode_padding", [p[1], p[1], p[0], p[0]] if padding_mode != "zeros" else None)
        with _built_on(device):
            super().__init__(in_channels, out_channels, k, s, p if padding_mode == "zeros" else [0, 0], d, groups,
                             bias)
        _absent(self, "bias")
        _place(self, device, dtype)

    def forward(self, input):  # noqa: A002
        if self._mode_padding is not None:
            input = F.pad(input, self._mode_padding, mode=self.padding_mode)  # noqa: A001
        return super().forward(input)

    def reset_parameters(self):
        _uniform_fan_in(self, self.in_channels // self.groups * self.kernel_size[0] * self.kernel_size[1])


@remember_init_args
class MaxPool2d(_C.nn.MaxPool2d):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        k = _pair(kernel_size, "MaxPool2d", "kernel_size")
        s = k if stride is None else _pair(stride, "MaxPool2d", "stride")
        p, d = _pair(padding, "MaxPool2d", "padding"), _pair(dilation, "MaxPool2d", "dilation")
        super().__init__(k, s, p, d, bool(ceil_mode))
        object.__setattr__(self, "return_indices", return_indices)
        if return_indices:  # (values and indices, from the Python form)
            object.__setattr__(self, "_forward_override", lambda input: F.max_pool2d(  # noqa: A002
                input, k, s, p, d, ceil_mode, return_indices=True))


@remember_init_args
class AvgPool2d(_C.nn.AvgPool2d):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        k = _pair(kernel_size, "AvgPool2d", "kernel_size")
        s, p = k if stride is None else _pair(stride, "AvgPool2d", "stride"), _pair(padding, "AvgPool2d", "padding")
        super().__init__(k, s, p, bool(ceil_mode), bool(count_include_pad))
        if divisor_override is not None:  # (the Python form divides each window's sum by it)
            object.__setattr__(self, "_forward_override", lambda input: F.avg_pool2d(  # noqa: A002
                input, k, s, p, ceil_mode, count_include_pad, divisor_override))


@remember_init_args
class LayerNorm(_C.nn.LayerNorm):
    def __init__(self, normalized_shape, eps=1e-05, elementwise_affine=True, bias=True, device=None, dtype=None):
        with _built_on(device):
            super().__init__(normalized_shape, eps, elementwise_affine and bias)
        if elementwise_affine and not bias:  # a weight without a bias: the C++ layer has neither; F.layer_norm
            from trainrun.nn.parameter import Parameter
            self.register_parameter("weight", Parameter(_C.ones(list(self.normalized_shape))))
            object.__setattr__(self, "_forward_override", lambda input: F.layer_norm(  # noqa: A002
                input, self.normalized_shape, self._param("weight"), None, self.eps))
        _absent(self, "weight", "bias")
        _place(self, device, dtype)

    def reset_parameters(self):
        from trainrun.nn import init
        for name, _ in self._named_local_parameters(False):
            (init.ones_ if name == "weight" else init.zeros_)(getattr(self, name))


@remember_init_args
class Embedding(_C.nn.Embedding):
    """padding_idx: that row starts at zero and receives no gradient; max_norm and scale_grad_by_freq as
    F.embedding's (with any of these the lookup runs in Python); sparse=True gives dense gradients."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        with _built_on(device):
            super().__init__(num_embeddings, embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is out of range for {num_embeddings} "
                                 "embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, \
            scale_grad_by_freq, sparse
        weight = self._param("weight")
        from trainrun._autograd import no_grad
        with no_grad():
            if _weight is not None:
                weight.copy_(_weight)
            elif padding_idx is not None:
                weight[padding_idx].fill_(0)
        if _freeze:
            weight.requires_grad_(False)
        if padding_idx is not None or max_norm is not None or scale_grad_by_freq:  # (the lookup in Python)
            object.__setattr__(self, "_forward_override", lambda input: F.embedding(  # noqa: A002
                input, self._param("weight"), self.padding_idx, self.max_norm, self.norm_type,
                self.scale_grad_by_freq, self.sparse))
        _place(self, device, dtype)

    def reset_parameters(self):
        from trainrun.nn import init
        init.normal_(self.weight)
        if self.padding_idx is not None:
            weight = self._param("weight")
            from trainrun._autograd import no_grad
            with no_grad():
                weight[self.padding_idx].fill_(0)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze, **kwargs)


class _BatchNormArguments:
    """PyTorch's BatchNorm constructor, for the C++ BatchNorm1d/BatchNorm2d that follow it in the bases."""

    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        with _built_on(device):  # (momentum=None: the C++ layer's own is unused, _batch_norm_forward averages)
            super().__init__(num_features, eps, 0.1 if momentum is None else momentum, affine, track_running_stats)
        if momentum is None:
            self.__dict__["_cumulative_average"] = True
        _absent(self, "weight", "bias")
        if not track_running_stats:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        _place(self, device, dtype)


def _batch_norm_option(name, position, default):
    """A constructor argument of a C++ BatchNorm, read back (PyTorch's attributes; set at construction).
    track_running_stats may be turned off afterwards (torch.func.replace_all_batch_norm_modules_ does)."""
    def read(self):
        if name == "track_running_stats" and "_batch_statistics_only" in self.__dict__:
            return False
        args, kwargs = self._init_args
        return args[position] if len(args) > position else kwargs.get(name, default)

    def write(self, value):
        if name != "track_running_stats" or value:
            raise AttributeError(f"{type(self).__name__}.{name} is set at construction")
        self.__dict__["_batch_statistics_only"] = True
        for buffer in ("running_mean", "running_var", "num_batches_tracked"):
            self.register_buffer(buffer, None)
    return property(read, write)


for _name, _position, _default in (("num_features", 0, None), ("eps", 1, 1e-05), ("momentum", 2, 0.1),
                                   ("affine", 3, True), ("track_running_stats", 4, True)):
    setattr(_BatchNormArguments, _name, _batch_norm_option(_name, _position, _default))


def _reset_running_stats(self):
    if self.track_running_stats:
        with no_grad():
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.num_batches_tracked.zero_()


_BatchNormArguments.reset_running_stats = _reset_running_stats


def _batch_norm_forward(self, input):  # noqa: A002
    """With track_running_stats turned off after construction: batch statistics in training and eval alike.
    With momentum=None: the running statistics are the cumulative average of the batches' (each training call
    weighs its batch by 1 / num_batches_tracked), as PyTorch's."""
    from trainrun.nn import functional as F
    if "_batch_statistics_only" in self.__dict__:
        return F.batch_norm(input, None, None, self.weight, self.bias, True, 0.0, self.eps)
    if "_cumulative_average" in self.__dict__ and self.track_running_stats:
        factor = 0.0
        if self.training:
            with no_grad():
                self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked)
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, self.training,
                            factor, self.eps)
    return super(_BatchNormArguments, self).forward(input)


_BatchNormArguments.forward = _batch_norm_forward


@remember_init_args
class BatchNorm1d(_BatchNormArguments, _C.nn.BatchNorm1d):
    pass


@remember_init_args
class BatchNorm2d(_BatchNormArguments, _C.nn.BatchNorm2d):
    pass


@remember_init_args
class BatchNorm3d(_BatchNormArguments, _C.nn.BatchNorm2d):
    """BatchNorm over (N, C, D, H, W): the per-channel statistics over N, D, H and W are BatchNorm2d's over
    (N, C, D*H, W)."""

    def forward(self, input):  # noqa: A002
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")
        n, c, d, h, w = input.shape
        return super().forward(input.reshape([n, c, d * h, w])).reshape([n, c, d, h, w])


@remember_init_args
class RMSNorm(_C.nn.RMSNorm):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        if not elementwise_affine:
            raise NotImplementedError("RMSNorm(elementwise_affine=False) is not supported")
        shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
        if len(shape) != 1:
            raise NotImplementedError("RMSNorm: only a normalized_shape of one dim is supported")
        with _built_on(device):
            super().__init__(shape[0], 1.1920928955078125e-07 if eps is None else eps)  # eps None: float32's eps
        _place(self, device, dtype)

    def reset_parameters(self):
        from trainrun.nn import init
        init.ones_(self.weight)


@remember_init_args
class Flatten(_C.nn.Flatten):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__(start_dim, end_dim)
