"""Convolution and pooling modules written in Python over nn.functional (the C++ layers are Conv2d, the 2-d
pools and their kin): Conv3d, ConvTranspose1d/3d, the 3-d pools and MaxUnpool1d/2d/3d, with PyTorch's constructors and
default initialisation."""
import math

from trainrun import _C
from trainrun.nn import functional as F
from trainrun.nn import init
from trainrun.nn._module import Module
from trainrun.nn.parameter import Parameter


def _triple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * 3


def transposed_parameters(module, in_channels, out_channels, kernel_size, groups, bias, device, dtype):
    """A transposed convolution's weight (in_channels, out_channels // groups, *kernel_size) and bias, with
    PyTorch's default initialisation (kaiming_uniform_(a=sqrt(5)), whose fan_in for this layout is
    weight.size(1) * prod(kernel_size))."""
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"{type(module).__name__}: in_channels ({in_channels}) and out_channels ({out_channels}) "
                         f"must be divisible by groups ({groups})")
    fan_in = out_channels // groups * math.prod(kernel_size)
    bound = 1.0 / math.sqrt(fan_in)
    module.weight = Parameter(init.uniform_(_C.empty([in_channels, out_channels // groups, *kernel_size], dtype=dtype,
                                                     device=device), -bound, bound))
    if bias:
        module.bias = Parameter(init.uniform_(_C.empty([out_channels], dtype=dtype, device=device), -bound, bound))
    else:
        module.register_parameter("bias", None)


def transposed_output_padding(module, input, output_size, n):  # noqa: A002
    """The output_padding that makes a transposed convolution give output_size (its last n entries: the spatial
    sizes), as PyTorch's _ConvTransposeNd._output_padding; the module's own when output_size is None."""
    if output_size is None:
        return module.output_padding
    def each(value):
        return list(value) if isinstance(value, (tuple, list)) else [value] * n
    wanted = list(output_size)[-n:]
    if len(wanted) != n:
        raise ValueError(f"ConvTranspose{n}D: output_size must have {n} or {n + 2} elements (got {len(output_size)})")
    stride, padding, dilation = each(module.stride), each(module.padding), each(module.dilation)
    kernel = list(module.kernel_size)
    extra = []
    for i in range(n):
        size = input.shape[input.dim() - n + i]
        smallest = (size - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + 1
        largest = smallest + stride[i] - 1
        if not smallest <= wanted[i] <= largest:
            raise ValueError(f"requested an output size of {wanted}, but valid sizes range from {smallest} to "
                             f"{largest} (for an input of {list(input.shape)[-n:]})")
        extra.append(wanted[i] - smallest)
    return tuple(extra)


class Conv3d(Module):
    """PyTorch's Conv3d: weight (out_channels, in_channels // groups, kD, kH, kW), its default init."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], but got "
                             f"padding_mode='{padding_mode}'")
        self.padding_mode = padding_mode
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv3d: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        k = _triple(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, k
        self.stride, self.dilation = _triple(stride), _triple(dilation)
        self.padding, self.groups = padding if isinstance(padding, str) else _triple(padding), groups
        self.weight = Parameter(_C.empty([out_channels, in_channels // groups, *k], dtype=dtype, device=device))
        bound = 1.0 / math.sqrt(in_channels // groups * k[0] * k[1] * k[2])  # kaiming_uniform_(a=sqrt(5))
        init.uniform_(self.weight, -bound, bound)
        if bias:
            self.bias = Parameter(init.uniform_(_C.empty([out_channels], dtype=dtype, device=device), -bound, bound))
        else:
            self.register_parameter("bias", None)

    def forward(self, input):  # noqa: A002
        if self.padding_mode != "zeros":  # padded that way first, as PyTorch's _conv_forward
            from trainrun.nn._layers import _mode_padding
            return F.conv3d(F.pad(input, _mode_padding(self.padding, self.kernel_size, self.dilation, 3),
                                  mode=self.padding_mode), self.weight, self.bias, self.stride, 0, self.dilation,
                            self.groups)
        return F.conv3d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
                + (f", padding={self.padding}" if self.padding not in ((0, 0, 0), "valid") else ""))


class ConvTranspose1d(Module):
    """PyTorch's ConvTranspose1d: weight (in_channels, out_channels // groups, k), its default init."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError("ConvTranspose1d: only padding_mode='zeros' is supported")
        k = kernel_size[0] if isinstance(kernel_size, (tuple, list)) else kernel_size
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (k,)
        self.stride, self.padding, self.output_padding = stride, padding, output_padding
        self.groups, self.dilation = groups, dilation
        transposed_parameters(self, in_channels, out_channels, (k,), groups, bias, device, dtype)

    def forward(self, input, output_size=None):  # noqa: A002
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  transposed_output_padding(self, input, output_size, 1), self.groups, self.dilation)


class ConvTranspose3d(Module):
    """PyTorch's ConvTranspose3d: weight (in_channels, out_channels // groups, kD, kH, kW), its default init."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError('Only "zeros" padding mode is supported for ConvTranspose3d')
        k = _triple(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, k
        self.stride, self.padding, self.output_padding = _triple(stride), _triple(padding), _triple(output_padding)
        self.groups, self.dilation, self.padding_mode = groups, _triple(dilation), padding_mode
        transposed_parameters(self, in_channels, out_channels, k, groups, bias, device, dtype)

    def forward(self, input, output_size=None):  # noqa: A002
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  transposed_output_padding(self, input, output_size, 3), self.groups, self.dilation)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
                + (f", padding={self.padding}" if self.padding != (0, 0, 0) else "")
                + (f", output_padding={self.output_padding}" if self.output_padding != (0, 0, 0) else ""))


class MaxPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation, self.return_indices, self.ceil_mode = padding, dilation, return_indices, ceil_mode

    def forward(self, input):  # noqa: A002
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):  # noqa: A002
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002
        return F.adaptive_avg_pool3d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool3d(AdaptiveAvgPool3d):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):  # noqa: A002
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class MaxUnpool2d(Module):
    """The inverse of MaxPool2d(return_indices=True): forward(input, indices, output_size=None)."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride if stride is not None else kernel_size, \
            padding

    def forward(self, input, indices, output_size=None):  # noqa: A002
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(MaxUnpool2d):
    """The inverse of MaxPool1d(return_indices=True)."""

    def forward(self, input, indices, output_size=None):  # noqa: A002
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool3d(MaxUnpool2d):
    """The inverse of MaxPool3d(return_indices=True)."""

    def forward(self, input, indices, output_size=None):  # noqa: A002
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class FractionalMaxPool2d(Module):
    """Fractional max pooling over (H, W): output_size, or output_ratio of the input's size (see
    _functional_fractional_pool.py); new random windows every call unless _random_samples are given."""
    _function = "fractional_max_pool2d"

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None):
        super().__init__()
        if output_size is None and output_ratio is None:
            raise ValueError(f"{type(self).__name__} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        ratios = output_ratio if isinstance(output_ratio, (tuple, list)) else [output_ratio]
        if output_ratio is not None and not all(0 < r < 1 for r in ratios):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
        self.kernel_size, self.output_size, self.output_ratio = kernel_size, output_size, output_ratio
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input):  # noqa: A002
        return getattr(F, self._function)(input, self.kernel_size, self.output_size, self.output_ratio,
                                          self.return_indices, _random_samples=self._random_samples)


class FractionalMaxPool3d(FractionalMaxPool2d):
    """Fractional max pooling over (T, H, W)."""
    _function = "fractional_max_pool3d"
