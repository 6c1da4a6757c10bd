"""trainrun.nn: Module (subclass it in Python: assign Parameters and child
modules as attributes, write forward), the C++ layers, and losses."""
import collections

from trainrun import _C
from trainrun.nn import functional  # noqa: F401
from trainrun.nn.parameter import Parameter

Linear, ReLU, GELU, Tanh, Dropout = _C.nn.Linear, _C.nn.ReLU, _C.nn.GELU, _C.nn.Tanh, _C.nn.Dropout
LayerNorm, Embedding, Flatten, Conv2d = _C.nn.LayerNorm, _C.nn.Embedding, _C.nn.Flatten, _C.nn.Conv2d
BatchNorm1d, BatchNorm2d, MaxPool2d, AvgPool2d = _C.nn.BatchNorm1d, _C.nn.BatchNorm2d, _C.nn.MaxPool2d, _C.nn.AvgPool2d
Softmax, SiLU, RMSNorm = _C.nn.Softmax, _C.nn.SiLU, _C.nn.RMSNorm
CausalSelfAttention, TransformerBlock = _C.nn.CausalSelfAttention, _C.nn.TransformerBlock


class Module(_C.nn.Module):
    """torch.nn.Module: attributes that are Parameters become parameters,
    attributes that are modules become children (in C++, so that DDP and
    state_dict see them); forward is yours."""

    def __init__(self):
        super().__init__(type(self).__name__)
        object.__setattr__(self, "_children_py", {})

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self.register_parameter(name, value, value.requires_grad)
        elif isinstance(value, _C.nn.Module):
            if "_children_py" not in self.__dict__:
                raise AttributeError("call super().__init__() before assigning modules")
            self.register_module(name, value)
            self._children_py[name] = value  # keeps a Python subclass (and its forward) alive
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        children = self.__dict__.get("_children_py", {})
        if name in children:
            return children[name]
        return super().__getattr__(name)  # parameters and buffers, from the C++ registry


def _cuda(self, device=None):
    """module.cuda(): every parameter and buffer to the GPU (current, or `device`)."""
    return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))


_C.nn.Module.cuda = _cuda
_unordered_state_dict = _C.nn.Module.state_dict


def _state_dict_keys(module, prefix=""):
    """PyTorch's state_dict order: a module's parameters, then its buffers, then each child's, recursively."""
    for name, _ in module.named_parameters(False):
        yield prefix + name
    for name, _ in module.named_buffers(False):
        yield prefix + name
    for name, child in module.named_children():
        yield from _state_dict_keys(child, prefix + name + ".")


def _state_dict(self, *args, destination=None, prefix="", keep_vars=False):
    """An OrderedDict in PyTorch's key order (the values are copies)."""
    values = _unordered_state_dict(self)
    out = collections.OrderedDict() if destination is None else destination
    for key in _state_dict_keys(self):
        if key in values:
            out[prefix + key] = values[key]
    for key, value in values.items():  # anything the walk did not reach keeps its place at the end
        out.setdefault(prefix + key, value)
    return out


_C.nn.Module.state_dict = _state_dict
_C.nn.Module.cpu = lambda self: self.to("cpu")


class Sequential(_C.nn.Sequential):
    """Children "0", "1", ... run in order."""

    def __init__(self, *modules):
        super().__init__(*modules)
        self._keep = list(modules)  # Python-defined children stay alive with it

    def __getitem__(self, i):
        return self._keep[i]

    def __len__(self):
        return len(self._keep)


class Identity(Module):
    """Returns its input (takes and ignores any constructor arguments, as PyTorch's)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):  # noqa: A002
        return input


class ModuleList(Module):
    """Modules held in a list and registered as children "0", "1", ...; it has no forward."""

    def __init__(self, modules=None):
        super().__init__()
        object.__setattr__(self, "_list", [])
        for m in modules or []:
            self.append(m)

    def append(self, module):
        setattr(self, str(len(self._list)), module)
        self._list.append(module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        return ModuleList(self._list[i]) if isinstance(i, slice) else self._list[i]

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)

    def forward(self, *args):
        raise NotImplementedError("ModuleList has no forward: call its modules")


class _Loss(Module):
    """A loss module: its options are attributes, as PyTorch's (criterion.reduction),
    passed to its functional form. Called with (input, target) directly, not
    through the one-tensor module call."""
    _options = ("reduction",)

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            raise TypeError(f"{type(self).__name__}: size_average and reduce are deprecated in PyTorch; "
                            "use reduction=")
        self.reduction = reduction

    def __call__(self, input, target):  # noqa: A002
        return self.forward(input, target)

    def forward(self, input, target):  # noqa: A002
        return self._function(input, target, **{name: getattr(self, name) for name in self._options})


class _WeightedLoss(_Loss):
    _options = ("weight", "ignore_index", "reduction")

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight, self.ignore_index = weight, ignore_index


class CrossEntropyLoss(_WeightedLoss):
    _function = staticmethod(functional.cross_entropy)
    _options = _WeightedLoss._options + ("label_smoothing",)

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, ignore_index, reduce, reduction)
        self.label_smoothing = label_smoothing


class NLLLoss(_WeightedLoss):
    _function = staticmethod(functional.nll_loss)


class MSELoss(_Loss):
    _function = staticmethod(functional.mse_loss)


class L1Loss(_Loss):
    _function = staticmethod(functional.l1_loss)


from trainrun.nn import utils  # noqa: E402,F401
from trainrun.nn import parallel  # noqa: E402,F401
