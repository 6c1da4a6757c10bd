"""copy.deepcopy(module) and pickle.dumps(module), as in PyTorch.

A module reduces to its class, the arguments its C++ layer was built with
(Python modules need none), and its state: training flag, parameters,
buffers, children and plain attributes. copy.deepcopy then copies that state
through its memo, so weights tied in the original (one tensor in two places)
are one tensor in the copy, and a module used twice is copied once."""
import weakref

from trainrun import _C
from trainrun._autograd import no_grad

_INTERNAL = ("_children_py", "_init_args")
# A C++ module hands out a new Python handle per access; pickle's memo goes by
# handle. While one handle of a tensor is alive (a pickler's memo keeps it),
# every module reduced in the same dumps() gets that one, so a weight tied
# between two modules unpickles as one tensor.
_handles = weakref.WeakValueDictionary()


def _canonical(t):
    return _handles.setdefault(t._cdata, t)


def remember_init_args(cls):
    """Class decorator for the C++ layers' Python classes: records the
    constructor's arguments, which a copy needs to build the C++ object."""
    init = cls.__init__

    def __init__(self, *args, **kwargs):
        object.__setattr__(self, "_init_args", (args, kwargs))
        init(self, *args, **kwargs)

    __init__.__doc__, __init__.__wrapped__ = init.__doc__, init
    cls.__init__ = __init__
    return cls


def _children(module):
    py_children = module.__dict__.get("_children_py", {})
    return [(name, py_children.get(name, child)) for name, child in module.named_children()]


def _reduce_ex(self, protocol):
    from trainrun.nn._module import Module
    init = self.__dict__.get("_init_args")
    if init is None and not isinstance(self, Module):
        raise TypeError(f"cannot copy or pickle a {type(self).__name__}: it is a C++ layer built without its "
                        "Python class (use trainrun.nn.{type(self).__name__})")
    state = {
        "training": self.training,
        "params": [(name, _canonical(p), p.requires_grad) for name, p in self._named_local_parameters(False)],
        "buffers": [(name, _canonical(b)) for name, b in self.named_buffers(False)],
        "children": _children(self),
        # A C++ layer's constructor makes its own forward override again, over the copy; the original's closes
        # over the original.
        "attrs": {k: v for k, v in self.__dict__.items()
                  if k not in _INTERNAL and not (init is not None and k == "_forward_override")},
    }
    return (_rebuild_module, (type(self), init, state))


def _rebuild_module(cls, init, state):
    from trainrun.nn._module import Module
    if init is None:  # a Python module: an empty one, filled from the state
        module = cls.__new__(cls)
        Module.__init__(module)
    else:
        # Built again, its weights then replaced from the state; its constructor's random draws are undone, as
        # PyTorch's copies draw none (TransformerEncoder's deepcopied layers, then the data, match PyTorch's).
        from trainrun import random
        generators = random._all_states()
        with no_grad():
            module = cls(*init[0], **init[1])
        random._set_all_states(generators)
    own_params = {name for name, _ in module._named_local_parameters(False)}
    own_buffers = {name for name, _ in module.named_buffers(False)}
    for name, p, requires_grad in state["params"]:
        if name in own_params:
            module._replace_parameter(name, p)
        else:
            module.register_parameter(name, p, requires_grad)
    with no_grad():
        for name, b in state["buffers"]:
            if name in own_buffers:
                module._buffer(name).copy_(b)
            else:
                module.register_buffer(name, b)
    for name, child in state["children"]:
        setattr(module, name, child)
    for key, value in state["attrs"].items():
        object.__setattr__(module, key, value)
    module.train(state["training"])
    return module


_C.nn.Module.__reduce_ex__ = _reduce_ex
