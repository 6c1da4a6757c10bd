"""The C++ layers as their functional forms, for inputs C++ cannot take: a DTensor (distribute_module with
replicated or sharded parameters, a layer outside a parallelize_module plan) runs F.linear, F.layer_norm, ...
over the layer's parameters as Python sees them (DTensors where sharded), so DTensor's sharding rules decide
the output's layout, as PyTorch's Python layers do."""
from trainrun import _C
from trainrun.nn import functional as F


def _linear(m, x):
    return F.linear(x, m.weight, m.bias)


def _conv2d(m, x):
    mode_padding = m.__dict__.get("_mode_padding")
    if mode_padding is not None:
        x = F.pad(x, mode_padding, mode=m.padding_mode)
    return F.conv2d(x, m.weight, m.bias, m.stride, 0 if mode_padding is not None else m.padding, m.dilation,
                    m.groups)


def _layer_norm(m, x):
    return F.layer_norm(x, list(m.normalized_shape), m.weight, m.bias, m.eps)


def _rms_norm(m, x):
    return F.rms_norm(x, [m.weight.shape[-1]], m.weight, _given(m)["eps"])


def _embedding(m, x):
    return F.embedding(x, m.weight, m.padding_idx, m.max_norm, m.norm_type, m.scale_grad_by_freq, m.sparse)


def _batch_norm(m, x):
    return F.batch_norm(x, m.running_mean, m.running_var, m.weight, m.bias, m.training or not m.track_running_stats,
                        m.momentum, m.eps)


def _given(m):
    from trainrun.nn._reprs import _given as given
    return given(m)


def _flatten(m, x):
    a = _given(m)
    return x.flatten(a["start_dim"], a["end_dim"])


def _max_pool2d(m, x):
    a = _given(m)
    return F.max_pool2d(x, a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"])


def _avg_pool2d(m, x):
    a = _given(m)
    return F.avg_pool2d(x, a["kernel_size"], a["stride"], a["padding"], a["ceil_mode"], a["count_include_pad"])


_FORMS = {"Linear": _linear, "Conv2d": _conv2d, "LayerNorm": _layer_norm, "RMSNorm": _rms_norm,
          "Embedding": _embedding, "_BatchNorm": _batch_norm, "BatchNorm1d": _batch_norm, "BatchNorm2d": _batch_norm,
          "Flatten": _flatten, "MaxPool2d": _max_pool2d, "AvgPool2d": _avg_pool2d}


def _form_of(module):
    for cls in type(module).__mro__:
        if getattr(_C.nn, cls.__name__, None) is cls:
            return _FORMS.get(cls.__name__)
    return None


def has_functional_form(module):
    """Whether module is a C++ layer whose computation has a functional form here."""
    return _form_of(module) is not None


def functional_forward(module, args):
    """module(*args) through the functional form of its C++ class, or a TypeError naming the layer."""
    form = _form_of(module)
    if form is not None and len(args) == 1:
        return form(module, args[0])
    kinds = ", ".join(type(a).__name__ for a in args)
    raise TypeError(f"{type(module).__name__}: this C++ layer takes tensors, got ({kinds}); it has no functional "
                    "form for them")
