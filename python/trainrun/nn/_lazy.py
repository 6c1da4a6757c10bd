"""The lazy modules (LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d,
LazyInstanceNorm1d/2d/3d): in_channels / num_features come from the first input (dim 1, or 0 unbatched), or from
the shapes of a state dict loaded before that. Until then the parameters are UninitializedParameters (not yet the
module's parameters: build the optimizer after the first call, as PyTorch asks). Then the module holds the real one
(Conv2d, BatchNorm2d, ..., built with PyTorch's initialisation) and is transparent: its state dict, parameter
names, attributes and repr are the real module's. (PyTorch turns the object itself into a Conv2d; here the C++
modules cannot change class, so isinstance(m, nn.Conv2d) stays False.)"""
from trainrun import _C
from trainrun.nn._module_wrapper import ModuleWrapper
from trainrun.nn.parameter import Parameter


class _UninitializedMeta(type(Parameter)):
    def __instancecheck__(cls, obj):
        return getattr(obj, "_uninitialized", None) == cls.__name__


class UninitializedParameter(Parameter, metaclass=_UninitializedMeta):
    """A parameter whose shape is not known yet (a lazy module's, before its first input)."""

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        param = Parameter(_C.empty([0], dtype=dtype, device=device), requires_grad)
        param._uninitialized = "UninitializedParameter"
        return param


class UninitializedBuffer(_C.Tensor, metaclass=_UninitializedMeta):
    """A buffer whose shape is not known yet."""

    __torch_function__ = _C._disabled_torch_function_impl

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        buffer = _C.empty([0], dtype=dtype, device=device)
        buffer._uninitialized = "UninitializedBuffer"
        return buffer


class LazyModuleMixin:
    cls_to_become = None

    def has_uninitialized_params(self):
        return self._lazy_module_or_none() is None

    def initialize_parameters(self, input):  # noqa: A002
        """Builds the real module for this input's channel count (dim 1; dim 0 of an unbatched input)."""
        batched = self._batched_ndim is None or input.dim() == self._batched_ndim
        self._materialize(input.shape[1] if batched else input.shape[0])


class _Lazy(LazyModuleMixin, ModuleWrapper):
    """Subclasses set _real (the module class), _batched_ndim, _parameter_names and _channels_of(state dict key ->
    shape), and call super().__init__(*args, **kwargs) with the real module's arguments after the channel count."""
    _child_name = "_lazy_module"
    _parameter_names = ("weight", "bias")

    def __init__(self, *args, **kwargs):
        super().__init__()
        self._lazy_args = (args, kwargs)
        self._uninitialized = {name: UninitializedParameter(dtype=kwargs.get("dtype")) for name in
                               self._wanted_parameters()}
        self._register_load_state_dict_pre_hook(self._materialize_from_state_dict, with_module=False)

    def _wanted_parameters(self):
        return self._parameter_names

    def _lazy_module_or_none(self):
        return self.__dict__.get("_materialized")

    def _materialize(self, channels):
        args, kwargs = self._lazy_args
        real = self._real(channels, *args, **kwargs)
        self._wrap(real)
        self.__dict__["_materialized"] = real
        self._uninitialized = {}

    def _materialize_from_state_dict(self, state_dict, prefix, *args):
        if self._lazy_module_or_none() is not None:
            return
        channels = self._channels_from(state_dict, prefix)
        if channels is None:
            return
        self._materialize(channels)
        inner = prefix + self._child_name + "."
        for key in [k for k in state_dict if k.startswith(prefix) and not k.startswith(inner)]:
            state_dict[inner + key[len(prefix):]] = state_dict.pop(key)

    def __getattr__(self, name):
        uninitialized = self.__dict__.get("_uninitialized") or {}
        if name in uninitialized:
            return uninitialized[name]
        if name != self._child_name and self.__dict__.get("_materialized") is None and \
                name in ("in_channels", "num_features", "in_features"):
            return 0
        return super().__getattr__(name)

    def forward(self, input, *args, **kwargs):  # noqa: A002
        if self._lazy_module_or_none() is None:
            self.initialize_parameters(input)
        return self._lazy_module_or_none()(input, *args, **kwargs)

    def __repr__(self):
        real = self._lazy_module_or_none()
        return repr(real) if real is not None else f"{type(self).__name__}(uninitialized)"


def _conv_channels(transposed):
    def channels_from(self, state_dict, prefix):
        weight = state_dict.get(prefix + "weight")
        if weight is None:
            return None
        groups = self._lazy_args[1].get("groups", 1)
        return weight.shape[0] if transposed else weight.shape[1] * groups
    return channels_from


def _norm_channels(self, state_dict, prefix):
    for name in ("weight", "running_mean"):
        value = state_dict.get(prefix + name)
        if value is not None:
            return value.shape[0]
    return None


def _lazy_class(name, real, batched_ndim, channels_from, parameters=("weight", "bias")):
    def wanted(self):
        kwargs = self._lazy_args[1]
        if real.__name__.startswith(("BatchNorm", "InstanceNorm")):
            return parameters if kwargs.get("affine", True) else ()
        return parameters if kwargs.get("bias", True) else parameters[:1]

    def __init__(self, *args, **kwargs):
        if real.__name__.startswith("InstanceNorm"):  # (PyTorch's lazy instance norms default to both on)
            names = ("eps", "momentum", "affine", "track_running_stats")
            kwargs = {**dict(zip(names, (1e-5, 0.1, True, True))), **dict(zip(names, args)), **kwargs}
            args = ()
        _Lazy.__init__(self, *args, **kwargs)
    return type(name, (_Lazy,), {"_real": real, "_batched_ndim": batched_ndim, "_channels_from": channels_from,
                                 "_wanted_parameters": wanted, "cls_to_become": real, "__init__": __init__,
                                 "__doc__": f"{real.__name__} whose input channels come from its first input."})


def build(nn):
    """The lazy classes over nn's modules, by name."""
    out = {"UninitializedParameter": UninitializedParameter, "UninitializedBuffer": UninitializedBuffer}
    for n in (1, 2, 3):
        out[f"LazyConv{n}d"] = _lazy_class(f"LazyConv{n}d", getattr(nn, f"Conv{n}d"), n + 2, _conv_channels(False))
        out[f"LazyConvTranspose{n}d"] = _lazy_class(f"LazyConvTranspose{n}d", getattr(nn, f"ConvTranspose{n}d"),
                                                    n + 2, _conv_channels(True))
        out[f"LazyBatchNorm{n}d"] = _lazy_class(f"LazyBatchNorm{n}d", getattr(nn, f"BatchNorm{n}d"), None,
                                                _norm_channels)  # (batch norm has no unbatched form)
        out[f"LazyInstanceNorm{n}d"] = _lazy_class(f"LazyInstanceNorm{n}d", getattr(nn, f"InstanceNorm{n}d"),
                                                   n + 2, _norm_channels)
    linear = _lazy_class("LazyLinear", nn.Linear, None, lambda self, state_dict, prefix: (
        None if state_dict.get(prefix + "weight") is None else state_dict[prefix + "weight"].shape[1]))
    linear.initialize_parameters = lambda self, input: self._materialize(input.shape[-1])  # noqa: A002
    out["LazyLinear"] = linear
    for name, cls in out.items():
        cls.__module__ = "trainrun.nn"
    return out
