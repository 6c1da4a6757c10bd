"""What print(model) shows inside each layer's parentheses (extra_repr), in PyTorch 2.6's words, for the layers
whose options live in C++ or in their constructor's arguments: `Conv2d(1, 2, kernel_size=(3, 3), stride=(2, 2),
bias=False)`, `LayerNorm((8,), eps=1e-05, elementwise_affine=True)`, `MaxPool2d(kernel_size=2, stride=2, ...)`.
install() sets them on the classes, once, when trainrun.nn is imported."""
import inspect


def _given(module):
    """The arguments a C++ layer's constructor was called with, defaults filled in (name -> value)."""
    args, kwargs = module.__dict__.get("_init_args", ((), {}))
    init = type(module).__init__
    bound = inspect.signature(getattr(init, "__wrapped__", init)).bind(module, *args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


def _ntuple(value, n):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def conv(m):
    n = len(m.kernel_size)
    s = f"{m.in_channels}, {m.out_channels}, kernel_size={tuple(m.kernel_size)}, stride={_ntuple(m.stride, n)}"
    padding = m.padding if isinstance(m.padding, str) else _ntuple(m.padding, n)
    mode_padding = m.__dict__.get("_mode_padding")  # (reflect/replicate/circular: padded before the C++ conv)
    if mode_padding is not None:
        padding = (mode_padding[2], mode_padding[0])
    if padding != (0,) * n:
        s += f", padding={padding}"
    if _ntuple(m.dilation, n) != (1,) * n:
        s += f", dilation={_ntuple(m.dilation, n)}"
    if hasattr(m, "output_padding") and _ntuple(m.output_padding, n) != (0,) * n:
        s += f", output_padding={_ntuple(m.output_padding, n)}"
    if m.groups != 1:
        s += f", groups={m.groups}"
    if getattr(m, "bias", None) is None:
        s += ", bias=False"
    if getattr(m, "padding_mode", "zeros") != "zeros":
        s += f", padding_mode={m.padding_mode}"
    return s


def layer_norm(m):
    return f"{tuple(m.normalized_shape)}, eps={m.eps}, elementwise_affine={m.weight is not None}"


def batch_norm(m):
    return f"{m.num_features}, eps={m.eps}, momentum={m.momentum}, affine={m.affine}, " \
           f"track_running_stats={m.track_running_stats}"


def group_norm(m):
    return f"{m.num_groups}, {m.num_channels}, eps={m.eps}, affine={m.affine}"


def embedding(m):
    s = f"{m.num_embeddings}, {m.embedding_dim}"
    if m.padding_idx is not None:
        s += f", padding_idx={m.padding_idx}"
    if m.max_norm is not None:
        s += f", max_norm={m.max_norm}"
    if m.norm_type != 2:
        s += f", norm_type={m.norm_type}"
    if m.scale_grad_by_freq:
        s += f", scale_grad_by_freq={m.scale_grad_by_freq}"
    if m.sparse:
        s += ", sparse=True"
    return s


def rms_norm(m):
    a = _given(m)
    shape = (a["normalized_shape"],) if isinstance(a["normalized_shape"], int) else tuple(a["normalized_shape"])
    return f"{shape}, eps={a['eps']}, elementwise_affine={a['elementwise_affine']}"


def flatten(m):
    a = _given(m)
    return f"start_dim={a['start_dim']}, end_dim={a['end_dim']}"


def max_pool(m):
    a = _given(m)
    stride = a["kernel_size"] if a["stride"] is None else a["stride"]
    return f"kernel_size={a['kernel_size']}, stride={stride}, padding={a['padding']}, dilation={a['dilation']}, " \
           f"ceil_mode={a['ceil_mode']}"


def avg_pool(m):
    a = _given(m)
    stride = a["kernel_size"] if a["stride"] is None else a["stride"]
    return f"kernel_size={a['kernel_size']}, stride={stride}, padding={a['padding']}"


def linear(m):
    out_features, in_features = m.weight.shape[0], m.weight.shape[1]
    return f"in_features={in_features}, out_features={out_features}, bias={m.bias is not None}"


def options(*names):
    """name=value for each option, as PyTorch's parameter-free layers print theirs."""
    return lambda m: ", ".join(f"{n}={getattr(m, n)!r}" for n in names)


def upsample(m):
    info = f"scale_factor={float(m.scale_factor)!r}" if m.scale_factor is not None else f"size={m.size!r}"
    return info + f", mode={m.mode!r}"


def parameters_listed(m):
    """ParameterList and ParameterDict: a line per entry, `(key): Parameter containing: [dtype of size 2x3]`."""
    from trainrun.nn.parameter import Parameter
    lines = []
    for key, p in (m.items() if hasattr(m, "items") else enumerate(m)):
        if hasattr(p, "shape"):
            device = f" ({p.device})" if p.device.type == "cuda" else ""
            kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
            lines.append(f"  ({key}): {kind} containing: [{p.dtype} of size {'x'.join(map(str, p.shape))}{device}]")
        else:
            lines.append(f"  ({key}): Object of type: {type(p).__name__}")
    return "\n".join(lines)


def install():
    from trainrun import nn
    table = {
        "Conv1d": conv, "Conv2d": conv, "Conv3d": conv, "ConvTranspose1d": conv, "ConvTranspose2d": conv,
        "LayerNorm": layer_norm, "BatchNorm1d": batch_norm, "BatchNorm2d": batch_norm, "BatchNorm3d": batch_norm,
        "GroupNorm": group_norm, "Embedding": embedding, "RMSNorm": rms_norm, "Flatten": flatten,
        "MaxPool2d": max_pool, "AvgPool2d": avg_pool, "AdaptiveAvgPool1d": options("output_size"),
        "AdaptiveAvgPool2d": options("output_size"), "AdaptiveMaxPool2d": options("output_size"),
        "PixelShuffle": options("upscale_factor"), "PixelUnshuffle": options("downscale_factor"),
        "PReLU": options("num_parameters"), "Unflatten": options("dim", "unflattened_size"),
        "Upsample": upsample, "NonDynamicallyQuantizableLinear": linear, "ParameterList": parameters_listed,
        "ParameterDict": parameters_listed,
    }
    for name, extra_repr in table.items():
        setattr(getattr(nn, name) if hasattr(nn, name) else getattr(nn._layers, name), "extra_repr", extra_repr)
    for name in ("ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
                 "ReplicationPad1d", "ReplicationPad2d"):
        getattr(nn, name).extra_repr = lambda m: f"padding={m.padding}, value={m.value}" if \
            type(m).__name__.startswith("Constant") else f"{m.padding}"
