"""trainrun.nn: Module (subclass it in Python: assign Parameters and child
modules as attributes, write forward), the C++ layers (Linear, Conv2d,
LayerNorm, Embedding, ...), the Python ones, containers, activations and
losses, and nn.init."""
import collections
import sys as _sys

from trainrun import _C
from trainrun._size import Size
from trainrun.nn import functional  # noqa: F401
from trainrun.nn.parameter import Buffer, Parameter  # noqa: F401
from trainrun.nn import _module
from trainrun.nn._module import Module, _is_buffer  # noqa: F401
from trainrun.utils.hooks import RemovableHandle  # noqa: F401
from trainrun.nn import _state_assign, _state_dict_hooks

from trainrun.nn._cpp_layers import (AvgPool2d, BatchNorm1d, BatchNorm2d, BatchNorm3d, Conv2d, Embedding,  # noqa
                                     Flatten, LayerNorm, Linear, MaxPool2d, RMSNorm)
CausalSelfAttention, TransformerBlock = _C.nn.CausalSelfAttention, _C.nn.TransformerBlock


def _cuda(self, device=None):
    """module.cuda(): every parameter and buffer to the GPU (current, or `device`)."""
    return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))


_C.nn.Module.cuda = _cuda
_unordered_state_dict = _C.nn.Module.state_dict


def _has_extra_state(module):
    return type(module).get_extra_state is not _C.nn.Module.get_extra_state


def _state_dict_keys(module, prefix=""):
    """PyTorch's state_dict order: a module's parameters, then its buffers, then its extra state, then each
    child's, recursively."""
    for name, _ in module._named_local_parameters(False):
        yield prefix + name
    for name, _ in module.named_buffers(False):
        yield prefix + name
    if _has_extra_state(module):
        yield prefix + "_extra_state"
    for name, child in module.named_children():
        yield from _state_dict_keys(child, prefix + name + ".")


_cpp_register_buffer = _C.nn.Module.register_buffer


def _register_buffer(self, name, tensor, persistent=True):
    """PyTorch's register_buffer: a tensor the module keeps and moves with it (to(), cuda()); persistent=False
    leaves it out of state_dict (and load_state_dict does not expect it), as a causal mask or rotary table is.
    None registers nothing yet: the name reads None until a tensor is assigned."""
    if not isinstance(name, str) or not name or "." in name:
        raise KeyError(f"buffer name should be a non-empty string without '.', got {name!r}")
    non_persistent = self.__dict__.setdefault("_non_persistent_buffers_set", set())
    if persistent:
        non_persistent.discard(name)
    else:
        non_persistent.add(name)
    if tensor is None:
        object.__setattr__(self, name, None)
        self.__dict__.setdefault("_none_buffers", set()).add(name)  # a tensor assigned later becomes the buffer
        return None
    if type(tensor).__name__ == "ComplexTensor":  # (a rotary table: kept as an attribute, not in state_dict)
        object.__setattr__(self, name, tensor)
        return None
    self.__dict__.get("_none_buffers", set()).discard(name)
    if not _C._is_cpp_tensor(tensor):
        raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (torch Tensor or None "
                        "required)")
    self.__dict__.pop(name, None)  # (a None placeholder gives way to the registered tensor)
    if _is_buffer(self, name):
        self._replace_buffer(name, tensor)  # registered again: the new tensor, as PyTorch's
    else:
        _cpp_register_buffer(self, name, tensor)
    _module.remember(tensor)


_C.nn.Module.register_buffer = _register_buffer


def _non_persistent_keys(module, prefix=""):
    """The state_dict keys of the buffers registered with persistent=False, in module and its children."""
    keys = {prefix + name for name in module.__dict__.get("_non_persistent_buffers_set", ())}
    for name, child in module.named_children():
        keys |= _non_persistent_keys(child, prefix + name + ".")
    return keys


def _modules_with_extra_state(module):
    """(state_dict prefix, module) for module and its descendants that define get_extra_state."""
    return [(name + "." if name else "", m) for name, m in module.named_modules() if _has_extra_state(m)]


def _persistent_state(module, extra=None):
    """The module's state_dict entries, unordered; with extra (a callable taking a module), also each
    `<prefix>_extra_state` entry, its value extra(module)."""
    values = _unordered_state_dict(module)
    for key in _non_persistent_keys(module):
        values.pop(key, None)
    if extra is not None:
        values.update((prefix + "_extra_state", extra(m)) for prefix, m in _modules_with_extra_state(module))
    return values


def _state_dict(self, *args, destination=None, prefix="", keep_vars=False):
    """An OrderedDict in PyTorch's key order (detached tensors sharing the module's memory; keep_vars: the
    parameters themselves), without non-persistent buffers; state_dict hooks run (_state_dict_hooks.py)."""
    _state_dict_hooks.run_state_dict_pre_hooks(self, prefix, keep_vars)
    values = _persistent_state(self, extra=lambda m: m.get_extra_state())
    if keep_vars:
        values.update((name, p) for name, p in self.named_parameters(remove_duplicate=False) if name in values)
    out = collections.OrderedDict() if destination is None else destination
    for key in _state_dict_keys(self):
        if key in values:
            out[prefix + key] = values[key]
    for key, value in values.items():  # anything the walk did not reach keeps its place at the end
        out.setdefault(prefix + key, value)
    return _state_dict_hooks.run_state_dict_post_hooks(self, out, prefix)


_C.nn.Module.state_dict = _state_dict
_cpp_load_state_dict = _C.nn.Module.load_state_dict


class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns, as PyTorch's: `missing, unexpected = model.load_state_dict(sd, strict=False)`."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _load_error(module, errors):
    return RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(type(module).__name__,
                                                                           "\n\t".join(errors)))


def _load_state_dict(self, state_dict, strict=True, assign=False):
    """Copies the dict's tensors into the module's (assign: the module takes them, _state_assign.py). With
    strict, a missing or unexpected key is PyTorch's RuntimeError naming them (after the load-state-dict post
    hooks saw them); a shape that differs always is, and then nothing is loaded. Returns (missing_keys,
    unexpected_keys). The caller's dict is not changed by the pre hooks, which see a copy (_state_dict_hooks.py)."""
    state_dict = collections.OrderedDict(state_dict)
    missing, unexpected, errors = [], [], []
    _state_dict_hooks.run_load_pre_hooks(self, state_dict, strict, missing, unexpected, errors)
    own = _persistent_state(self, extra=lambda m: None)
    missing += [key for key in _state_dict_keys(self) if key in own and key not in state_dict]
    unexpected += [key for key in state_dict if key not in own]
    errors += [f"size mismatch for {key}: copying a param with shape {Size(value.shape)} from checkpoint, the shape "
               f"in current model is {Size(own[key].shape)}."
               for key, value in state_dict.items()
               if key in own and hasattr(value, "shape") and hasattr(own[key], "shape") and
               tuple(value.shape) != tuple(own[key].shape)]
    if errors:
        raise _load_error(self, errors)
    extras = {prefix + "_extra_state": m for prefix, m in _modules_with_extra_state(self)}
    entries = {k: v for k, v in state_dict.items() if k in own and k not in extras}
    if assign:
        _state_assign.assign_entries(self, entries)
    else:
        _state_assign.warn_meta_no_ops(own, entries)
        _cpp_load_state_dict(self, entries, False)
    for key, module in extras.items():
        if key in state_dict:
            module.set_extra_state(state_dict[key])
    incompatible = _IncompatibleKeys(missing, unexpected)
    _state_dict_hooks.run_load_post_hooks(self, incompatible)
    if strict and (incompatible.missing_keys or incompatible.unexpected_keys):
        if incompatible.unexpected_keys:
            errors.append("Unexpected key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in incompatible.unexpected_keys)))
        if incompatible.missing_keys:
            errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in incompatible.missing_keys)))
        raise _load_error(self, errors)
    return incompatible


_C.nn.Module.load_state_dict = _load_state_dict
_state_dict_hooks.install()
_C.nn.Module.cpu = lambda self: self.to("cpu")


from trainrun.nn import init  # noqa: E402,F401
from trainrun.nn._containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: E402,F401
from trainrun.nn._declared_modules import _Loss, _WeightedLoss, declared as _declared  # noqa: E402,F401
globals().update(_declared())
from trainrun.nn._layers import (  # noqa: E402,F401
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, Bilinear, CircularPad1d,
    CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, Conv1d, ConvTranspose2d,
    CosineSimilarity, EmbeddingBag, Fold, GroupNorm, Identity, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
    LPPool1d, LPPool2d, LPPool3d, MaxPool1d, MultiheadAttention, PairwiseDistance, PixelShuffle, PixelUnshuffle,
    PReLU, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
    Softmax2d, Unflatten, Unfold, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d, ZeroPad1d, ZeroPad2d,
    ZeroPad3d)
from trainrun.nn._conv_pool_layers import (AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, Conv3d,  # noqa
                                           ConvTranspose1d, ConvTranspose3d, FractionalMaxPool2d,
                                           FractionalMaxPool3d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from trainrun.nn._transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: E402,F401
                                      TransformerEncoder, TransformerEncoderLayer)
from trainrun.nn._recurrent import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: E402,F401
from trainrun.nn._sync_batch_norm import SyncBatchNorm  # noqa: E402,F401
from trainrun.nn import utils  # noqa: E402,F401
from trainrun.nn import parallel  # noqa: E402,F401
from trainrun.nn import attention  # noqa: E402,F401  (nn.attention.sdpa_kernel)
from trainrun.nn import _reset_parameters  # noqa: E402
_reset_parameters.install(_sys.modules[__name__])  # (reset_parameters() of the layers that lacked one)
from trainrun.nn import _lazy, parameter as _parameter  # noqa: E402
globals().update(_lazy.build(_sys.modules[__name__]))  # (LazyConv2d, LazyBatchNorm1d, UninitializedParameter, ...)
_parameter.UninitializedParameter, _parameter.UninitializedBuffer = UninitializedParameter, UninitializedBuffer  # noqa
from trainrun.nn import _reprs  # noqa: E402
_reprs.install()
from trainrun.nn._adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: E402,F401


class Container(Module):  # noqa: E302
    """PyTorch's long-deprecated Container: a Module whose keyword arguments become its children."""

    def __init__(self, **kwargs):
        import warnings
        warnings.warn("nn.Container is deprecated. All of it's functionality is now implemented in nn.Module. "
                      "Subclass that instead.", stacklevel=2)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


from trainrun.nn._cross_map_lrn import CrossMapLRN2d  # noqa: E402,F401  (Lua Torch's LRN, kept by PyTorch)


class NLLLoss2d(globals()["NLLLoss"]):  # noqa: E302  (PyTorch's deprecated name: NLLLoss over (N, C, H, W))
    pass


from trainrun.nn import modules  # noqa: E402,F401  (torch.nn.modules.<file> paths: after every layer is defined)
from trainrun.nn import common_types, grad  # noqa: E402,F401  (torch.nn.common_types, torch.nn.grad)
