"""torch.nn.utils.parametrize: a module's tensor computed from an original one at each read.

register_parametrization(module, "weight", p) moves the parameter to module.parametrizations.weight.original
(state_dict key `parametrizations.weight.original`, as PyTorch's) and gives the module a class of its own,
derived from its class, with a `weight` property that returns p(original) (several parametrizations chain).
A C++ layer (Linear, Conv2d, ...) reads its registered weight in C++; once parametrized it runs its functional
form (nn/_cpp_layers_functional.py) over the property instead. Assigning module.weight = value stores
right_inverse(value) in the original, where the parametrization has one."""
import contextlib

from trainrun import _C
from trainrun._autograd import no_grad
from trainrun.nn._containers import ModuleDict, ModuleList
from trainrun.nn._module import Module
from trainrun.nn.parameter import Parameter

_cache = {"enabled": False, "values": {}}


@contextlib.contextmanager
def cached():
    """Inside, each parametrized tensor is computed once (its first read) and reused."""
    _cache["enabled"] = True
    try:
        yield
    finally:
        _cache["enabled"] = False
        _cache["values"].clear()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, in order, and the original they are applied to."""

    def __init__(self, modules, original, unsafe=False):
        super().__init__(modules)
        self.unsafe = unsafe
        first = modules[0]
        if hasattr(first, "right_inverse"):
            with no_grad():
                new = first.right_inverse(original)
        else:
            new = original
        if isinstance(new, (tuple, list)):  # several originals (weight_norm: magnitude and direction)
            self.is_tensor = False
            self.ntensors = len(new)
            for i, t in enumerate(new):
                self.register_parameter(f"original{i}", Parameter(t.detach().clone(), original.requires_grad))
        else:
            self.is_tensor = True
            self.ntensors = 1
            with no_grad():
                value = original if new is original else new.detach().clone()
            self.register_parameter("original", value if isinstance(value, Parameter) else
                                    Parameter(value, original.requires_grad))

    def right_inverse(self, value):
        """Stores value (through each parametrization's right_inverse, last to first) in the original(s)."""
        with no_grad():
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    value = module.right_inverse(value)
                else:
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
            if self.is_tensor:
                self.original.copy_(value)
            else:
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").copy_(t)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _parametrized_value(module, name):
    key = (id(module), name)
    if _cache["enabled"] and key in _cache["values"]:
        return _cache["values"][key]
    value = module.parametrizations[name]()
    if _cache["enabled"]:
        _cache["values"][key] = value
    return value


def _tensor_property(name):
    def get(self):
        return _parametrized_value(self, name)

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)
    return property(get, set_)


def unregister(module, name):
    if isinstance(module, Module):
        delattr(module, name)
    else:
        module._unregister(name)


def _functional_forward(self, *args):
    """A parametrized C++ layer's forward: its functional form over the parametrized tensors (its C++ forward
    would read the registry, where the tensor no longer is)."""
    from trainrun.nn._cpp_layers_functional import functional_forward
    return functional_forward(self, args)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """module.tensor_name becomes parametrization(original) at each read; returns module."""
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        return module
    params = dict(module._named_local_parameters(False))
    buffers = dict(module.named_buffers(False))
    if tensor_name in params:
        original = getattr(module, tensor_name)
    elif tensor_name in buffers:
        original = buffers[tensor_name]
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
                         f"with name '{tensor_name}'")
    if not unsafe:
        with no_grad():
            probe = parametrization(original)
        if not _C._is_cpp_tensor(probe) or probe.dtype != original.dtype or \
                tuple(probe.shape) != tuple(original.shape):
            raise ValueError(f"Registering a parametrization may not change the shape or dtype of the tensor "
                             f"(unsafe=False): {tuple(original.shape)} {original.dtype} became "
                             f"{tuple(getattr(probe, 'shape', ()))} {getattr(probe, 'dtype', None)}")
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    unregister(module, tensor_name)
    if not is_parametrized(module):
        derive_class(module)
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    setattr(type(module), tensor_name, _tensor_property(tensor_name))
    return module


def derive_class(module, prefix="Parametrized"):
    """Gives module a class of its own derived from its class (once), where properties for computed tensors
    can go; a C++ layer's forward becomes its functional form over them."""
    cls = type(module)
    if "_original_class" in vars(cls):
        return cls
    namespace = {"__module__": cls.__module__, "_original_class": cls}
    from trainrun.nn._cpp_layers_functional import has_functional_form
    if has_functional_form(module):  # a C++ layer: its C++ computation would read the registry
        namespace["forward"] = _functional_forward
    module.__class__ = type(f"{prefix}{cls.__name__}", (cls,), namespace)
    return module.__class__


def restore_class(module):
    """module's class back to the one derive_class derived from, once no computed tensor is left."""
    original = vars(type(module)).get("_original_class")
    if original is not None and not any(isinstance(v, property) for k, v in vars(type(module)).items()):
        module.__class__ = original


def is_parametrized(module, tensor_name=None):
    try:
        plists = module.parametrizations
    except AttributeError:
        return False
    return isinstance(plists, ModuleDict) and (tensor_name is None or tensor_name in plists)


def type_before_parametrizations(module):
    return getattr(type(module), "_original_class", type(module))


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Back to a plain tensor: the current parametrized value (leave_parametrized) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if leave_parametrized:
        with no_grad():
            value = plist()
        first = plist.original if plist.is_tensor else plist.original0
        new = Parameter(value.detach().clone(), first.requires_grad)
    else:
        if not plist.is_tensor:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                             "parametrized in terms of a sequence of tensors.")
        new = plist.original
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if len(module.parametrizations) == 0:
        unregister(module, "parametrizations")
        restore_class(module)
    module.register_parameter(tensor_name, new)
    return module
