"""torch.overrides: __torch_function__, PyTorch's protocol for classes that stand in for tensors or change what
tensors do.

A class that defines `__torch_function__(cls, func, types, args=(), kwargs=None)` gets the calls of trainrun's
functions (trainrun.*, nn.functional, linalg, special, fft) that are given one of its instances, as
`func` (the public function, `trainrun.add`), the overriding types, and the call's arguments; NotImplemented
passes the call to the next overriding argument, and a TypeError names them all when none takes it. A Tensor
subclass inherits Tensor.__torch_function__, which runs the call and returns tensors as the subclass, and its
methods and operators (`x.add(1)`, `x + 1`, `repr(x)`) come to its __torch_function__ as `Tensor.add`,
`Tensor.__add__`, ... A TorchFunctionMode (`with LoggingMode():`) sees every call on its thread first: the
namespaces' functions, and plain tensors' methods and operators (not the ops inside layers written in C++).
nn.Parameter opts out (`__torch_function__ = _disabled_torch_function_impl`), so ops on parameters return plain
tensors.

The per-call check is C (python/csrc/torch_function.cc): each namespace function is wrapped once at import in
an object that forwards to it unless an argument's class overrides or a mode is on, and then calls `_dispatch`
here. Tensor methods cost nothing for plain tensors: a subclass that overrides gets wrappers of its own when it
is defined (Tensor.__init_subclass__), and Tensor itself only while a mode is entered on some thread. Properties
(`x.shape`, `x.grad`) are not dispatched."""
import collections
import contextlib
import functools
import importlib
import threading
import types
import warnings

from trainrun import _C

__all__ = ["BaseTorchFunctionMode", "TorchFunctionMode", "get_ignored_functions", "get_overridable_functions",
           "get_testing_overrides", "handle_torch_function", "has_torch_function", "has_torch_function_unary",
           "has_torch_function_variadic", "is_tensor_like", "is_tensor_method_or_property", "resolve_name",
           "wrap_torch_function", "enable_reentrant_dispatch"]

_disabled_torch_function_impl = _C._disabled_torch_function_impl
Tensor = _C.Tensor


# ---- per-thread state: DisableTorchFunction blocks and the mode stack (mirrored in C for the per-call check) -----

def _state():
    return _C._get_torch_function_state()  # (subclass blocks open, all blocks open, modes on the stack)


def _set_state(subclass_disabled, all_disabled, modes):
    _C._set_torch_function_state(subclass_disabled, all_disabled, modes)


class DisableTorchFunctionSubclass:
    """Within it, __torch_function__ of arguments' classes is not called (modes still are): how
    Tensor.__torch_function__ runs the call it was given."""

    def __enter__(self):
        sub, all_, modes = _state()
        _set_state(sub + 1, all_, modes)
        return self

    def __exit__(self, *exc):
        sub, all_, modes = _state()
        _set_state(sub - 1, all_, modes)
        return False


class DisableTorchFunction:
    """Within it, neither arguments' __torch_function__ nor modes are called."""

    def __enter__(self):
        sub, all_, modes = _state()
        _set_state(sub + 1, all_ + 1, modes)
        return self

    def __exit__(self, *exc):
        sub, all_, modes = _state()
        _set_state(sub - 1, all_ - 1, modes)
        return False


_local = threading.local()


def _mode_stack():
    stack = getattr(_local, "modes", None)
    if stack is None:
        stack = _local.modes = []
    return stack


def _push_mode(mode):
    stack = _mode_stack()
    stack.append(mode)
    sub, all_, _ = _state()
    _set_state(sub, all_, len(stack))


def _pop_mode():
    stack = _mode_stack()
    if not stack:
        raise RuntimeError("Trying to pop from an empty mode stack")
    mode = stack.pop()
    sub, all_, _ = _state()
    _set_state(sub, all_, len(stack))
    return mode


@contextlib.contextmanager
def _pop_mode_temporarily():
    mode = _pop_mode()
    try:
        yield mode
    finally:
        _push_mode(mode)


def _get_current_function_mode():
    stack = _mode_stack()
    return stack[-1] if stack else None


def _get_current_function_mode_stack():
    return list(_mode_stack())


def _is_torch_function_mode_enabled():
    _, all_disabled, modes = _state()
    return modes > 0 and all_disabled == 0


def _is_torch_function_enabled():
    return _state()[0] == 0


class TorchFunctionMode:
    """A context manager whose __torch_function__(func, types, args=(), kwargs=None) sees every trainrun function
    called on this thread while it is entered (innermost mode first). While it runs, it is off the stack, so
    calling func from it runs the function (or the next mode)."""

    inner = None

    def __init__(self, inner=None):
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError()

    def __enter__(self):
        _push_mode(self)
        _retain_tensor_method_wrappers()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        _pop_mode()
        _release_tensor_method_wrappers()

    @classmethod
    def push(cls, *args, **kwargs):
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just `with Mode()`")
        return cls(*args, **kwargs)


class BaseTorchFunctionMode(TorchFunctionMode):
    """A mode that runs every call unchanged: subclass it and override what to change."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


# ---- the protocol ----------------------------------------------------------------------------------------------

def _overrides(cls):
    impl = getattr(cls, "__torch_function__", _disabled_torch_function_impl)
    return impl is not _disabled_torch_function_impl and cls is not Tensor and not _is_pytorchs(cls)


def _is_pytorchs(cls):
    """A class of PyTorch itself (its Tensor, Parameter): its __torch_function__ serves torch's functions, not
    ours, so trainrun.from_dlpack(torch_tensor) and trainrun.tensor(torch_tensor) are plain calls."""
    module = getattr(cls, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


def _get_overloaded_args(relevant_args, get_type_fn=type):
    """The arguments whose __torch_function__ is called, in PyTorch's order: one per class, left to right, a
    subclass before its base."""
    overloaded_types, overloaded_args = set(), []
    for arg in relevant_args:
        arg_type = get_type_fn(arg)
        if arg_type in overloaded_types or not _overrides(arg_type):
            continue
        overloaded_types.add(arg_type)
        index = len(overloaded_args)
        for i, earlier in enumerate(overloaded_args):
            if issubclass(arg_type, get_type_fn(earlier)):
                index = i
                break
        overloaded_args.insert(index, arg)
    return overloaded_args


def _relevant(args, kwargs):
    """Every argument, and the elements of list and tuple arguments (one level), as the C check looks."""
    out = []
    for a in list(args) + list(kwargs.values()):
        if type(a) in (list, tuple):
            out.extend(a)
        else:
            out.append(a)
    return out


def has_torch_function(relevant_args):
    """Whether a call with these arguments goes to __torch_function__: a mode is on, or one of them overrides."""
    subclass_disabled, all_disabled, modes = _state()
    if all_disabled:
        return False
    if modes:
        return True
    return not subclass_disabled and any(_overrides(type(a)) for a in relevant_args)


def has_torch_function_unary(arg):
    return has_torch_function((arg,))


def has_torch_function_variadic(*args):
    return has_torch_function(args)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Calls the mode's, then the overriding arguments', __torch_function__ until one does not return
    NotImplemented; TypeError when none takes the call."""
    overloaded_args = _get_overloaded_args(relevant_args) if _is_torch_function_enabled() else []
    types_ = tuple(map(type, overloaded_args))
    if _is_torch_function_mode_enabled():
        with _pop_mode_temporarily() as mode:
            result = mode.__torch_function__(public_api, types_, args, kwargs)
        if result is not NotImplemented:
            return result
    for arg in overloaded_args:
        result = arg.__torch_function__(public_api, types_, args, kwargs)
        if result is not NotImplemented:
            return result
    name = resolve_name(public_api) or repr(public_api)
    message = (f"no implementation found for '{name}' on types that implement __torch_function__: "
               f"{[type(a) for a in overloaded_args]}")
    if _is_torch_function_mode_enabled():
        message += f" nor in mode {_get_current_function_mode()}"
    raise TypeError(message)


def _dispatch(public_api, original, args, kwargs):
    """The C wrapper's call when a mode is on or an argument's class has __torch_function__ (original: the
    function, called when that class is PyTorch's own)."""
    relevant = _relevant(args, kwargs)
    if not _is_torch_function_mode_enabled() and not _get_overloaded_args(relevant):
        return original(*args, **kwargs)
    return handle_torch_function(public_api, relevant, *args, **kwargs)


def wrap_torch_function(dispatcher):
    """A decorator for a function of your own: dispatcher(*args, **kwargs) names its relevant arguments, and a
    call with one that overrides goes to __torch_function__ with the decorated function as func."""
    def inner(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant_args = dispatcher(*args, **kwargs)
            if has_torch_function(relevant_args):
                return handle_torch_function(wrapped, relevant_args, *args, **kwargs)
            return func(*args, **kwargs)
        return wrapped
    return inner


@contextlib.contextmanager
def enable_reentrant_dispatch():
    """(PyTorch's __torch_dispatch__ re-entry; trainrun has no Python dispatch key to re-enter.)"""
    yield


def is_tensor_like(inp):
    """A Tensor, or an object whose class defines __torch_function__."""
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def resolve_name(f):
    """'trainrun.add', 'trainrun.Tensor.add', ... for a function that can be overridden; None otherwise."""
    for module, names in _WRAPPED.items():
        for name in names:
            if getattr(module, name, None) is f:
                return f"{module.__name__}.{name}"
    for name in _tensor_method_names():
        if getattr(Tensor, name, None) is f:
            return f"trainrun.Tensor.{name}"
    return None


def _resolve(module_name, name):
    """How a wrapped function unpickles: the object `module_name.name` now."""
    return getattr(importlib.import_module(module_name), name)


# ---- what is wrapped ------------------------------------------------------------------------------------------

# Functions with no tensor to dispatch on, or that act on the process rather than on data (PyTorch's
# get_ignored_functions has these): they are called directly, also under a mode.
_IGNORED = frozenset({
    "compile", "load", "save", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
    "set_default_dtype", "get_default_dtype", "set_default_device", "get_default_device", "set_default_tensor_type",
    "set_num_threads", "get_num_threads", "set_num_interop_threads", "get_num_interop_threads",
    "set_printoptions", "get_printoptions", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode", "get_deterministic_debug_mode",
    "set_float32_matmul_precision", "get_float32_matmul_precision", "is_grad_enabled", "is_inference_mode_enabled",
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "set_anomaly_enabled", "is_storage", "is_tensor",
    "typename", "vmap", "cond", "set_warn_always", "is_warn_always_enabled", "_assert",
})
_NAMESPACE_MODULES = ("trainrun", "trainrun.nn.functional", "trainrun.linalg", "trainrun.special", "trainrun.fft")
_WRAPPED = {}  # module -> names wrapped there


def _wrappable(name, value):
    return (not name.startswith("_") and name not in _IGNORED
            and isinstance(value, (types.FunctionType, types.BuiltinFunctionType)))


def _install_namespace_wrappers():
    """Wraps every public function of the namespaces (once: trainrun/__init__.py calls this last)."""
    for module_name in _NAMESPACE_MODULES:
        module = importlib.import_module(module_name)
        names = _WRAPPED.setdefault(module, [])
        for name, value in list(vars(module).items()):
            if _wrappable(name, value):
                setattr(module, name, _C._torch_function_wrapper(value, module, name))
                names.append(name)
            elif _C._is_torch_function_wrapper(value):  # (the same function, bound in another namespace too)
                names.append(name)
    _C._set_torch_function_handler(_dispatch)


def get_ignored_functions():
    """The namespaces' functions that __torch_function__ does not see."""
    out = set()
    for module_name in _NAMESPACE_MODULES:
        module = importlib.import_module(module_name)
        out.update(getattr(module, n) for n in _IGNORED if callable(getattr(module, n, None)))
    out.add(Tensor.as_subclass)
    return out


def get_overridable_functions():
    """{namespace: [its functions that __torch_function__ sees]}, and Tensor: [its methods]."""
    out = collections.defaultdict(list)
    for module, names in _WRAPPED.items():
        out[module].extend(getattr(module, n) for n in names)
    out[Tensor].extend(getattr(Tensor, n) for n in _tensor_method_names())
    return dict(out)


def get_testing_overrides():
    """{overridable function: a stand-in that returns -1} (PyTorch's table for testing that a class overrides
    everything: call each with your object)."""
    def dummy(*args, **kwargs):
        return -1
    return {f: dummy for fs in get_overridable_functions().values() for f in fs}


def is_tensor_method_or_property(func):
    return any(getattr(Tensor, n, None) is func for n in _tensor_method_names())


# ---- Tensor's side ---------------------------------------------------------------------------------------------

# Tensor attributes a subclass's __torch_function__ does not see: object machinery, pickling, construction.
_NOT_DISPATCHED = frozenset({
    "__new__", "__init__", "__init_subclass__", "__torch_function__", "__getattribute__", "__getattr__",
    "__setattr__", "__delattr__", "__class__", "__subclasshook__", "__instancecheck__", "__subclasscheck__",
    "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__dir__", "__sizeof__", "__hash__",
    "__class_getitem__", "__weakref__", "__dict__", "__module__", "__doc__", "as_subclass",
})


@functools.lru_cache(maxsize=None)
def _tensor_method_names():
    names = []
    for name in dir(Tensor):
        if name in _NOT_DISPATCHED or (name.startswith("_") and not name.startswith("__")):
            continue
        value = Tensor.__dict__.get(name, getattr(Tensor, name, None))
        if isinstance(value, (property, classmethod, staticmethod)) or not callable(value):
            continue
        if isinstance(value, type) or value is getattr(object, name, None):
            continue  # (object's own: str() comes through __repr__)
        names.append(name)
    return tuple(names)


# Operators whose calls reach __torch_function__ as the method they run (x + y as Tensor.add), as PyTorch's.
_OPERATOR_METHODS = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div", "__pow__": "pow",
                     "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
                     "__neg__": "neg", "__abs__": "abs", "__invert__": "bitwise_not"}


def _method_override(name, base):
    public = getattr(Tensor, _OPERATOR_METHODS.get(name, name), base)

    def method(self, *args, **kwargs):
        if _C._torch_function_subclass_enabled():
            relevant = (self, *args, *kwargs.values())
            return handle_torch_function(public, relevant, self, *args, **kwargs)
        return base(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = getattr(base, "__doc__", None)
    return method


# While any thread has a mode entered, Tensor's own methods and operators are wrappers too, so the mode sees
# `x.relu()` and `x + y` on plain tensors as PyTorch's modes do; the originals come back when the last mode
# exits (a plain tensor's method costs nothing extra otherwise).
_mode_users = 0
_mode_users_lock = threading.Lock()
_saved_tensor_methods = {}
_MISSING = object()


def _mode_method(name, original):
    def method(self, *args, **kwargs):
        if _is_torch_function_mode_enabled():
            public = getattr(Tensor, _OPERATOR_METHODS.get(name, name))
            return handle_torch_function(public, (self, *args, *kwargs.values()), self, *args, **kwargs)
        return original(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = getattr(original, "__doc__", None)
    return method


def _retain_tensor_method_wrappers():
    global _mode_users
    with _mode_users_lock:
        _mode_users += 1
        if _mode_users > 1:
            return
        for name in _tensor_method_names():
            original = getattr(Tensor, name)
            _saved_tensor_methods[name] = Tensor.__dict__.get(name, _MISSING)
            setattr(Tensor, name, _mode_method(name, original))


def _release_tensor_method_wrappers():
    global _mode_users
    with _mode_users_lock:
        _mode_users -= 1
        if _mode_users > 0:
            return
        for name, saved in _saved_tensor_methods.items():
            if saved is _MISSING:
                delattr(Tensor, name)
            else:
                setattr(Tensor, name, saved)
        _saved_tensor_methods.clear()


def _install_method_overrides(cls):
    """The Tensor methods cls does not define itself, as methods that go to its __torch_function__."""
    own = set()
    for klass in cls.__mro__:
        if klass is Tensor:
            break
        own.update(vars(klass))
    for name in _tensor_method_names():
        if name not in own:
            setattr(cls, name, _method_override(name, getattr(Tensor, name)))


def _convert(ret, cls):
    """Tensor results of a call on a subclass, as that subclass (tuples and lists of them too)."""
    if cls is Tensor:
        return ret
    if _C._is_cpp_tensor(ret) and not isinstance(ret, cls):
        return ret.as_subclass(cls)
    if isinstance(ret, (tuple, list)):
        converted = [_convert(r, cls) for r in ret]
        if hasattr(ret, "_make"):  # (a named tuple)
            return ret._make(converted)
        try:
            return type(ret)(converted)
        except TypeError:
            return ret
    return ret


def get_default_nowrap_functions():
    """Functions whose results Tensor.__torch_function__ returns as they are (PyTorch's: property getters,
    which trainrun does not dispatch)."""
    return set()


def _tensor_torch_function(cls, func, types, args=(), kwargs=None):
    """Tensor.__torch_function__: runs func with subclass dispatch off, and returns its tensors as cls."""
    if kwargs is None:
        kwargs = {}
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        ret = func(*args, **kwargs)
        if any(func is f for f in get_default_nowrap_functions()):  # (pybind's methods do not hash)
            return ret
        return _convert(ret, cls)


def _tensor_init_subclass(cls, **kwargs):
    super(Tensor, cls).__init_subclass__(**kwargs)
    if _overrides(cls):
        _install_method_overrides(cls)


def install():
    """Tensor.__torch_function__ and the subclass hook, the _C names PyTorch has, then the namespace wrappers."""
    for name in _tensor_method_names():  # (PyTorch's names where a Python function stands in: _repr is __repr__)
        value = Tensor.__dict__.get(name)
        if isinstance(value, types.FunctionType) and value.__name__ != name:
            value.__name__, value.__qualname__ = name, f"Tensor.{name}"
    Tensor.__torch_function__ = classmethod(_tensor_torch_function)
    Tensor.__init_subclass__ = classmethod(_tensor_init_subclass)
    _C.DisableTorchFunctionSubclass = DisableTorchFunctionSubclass
    _C.DisableTorchFunction = DisableTorchFunction
    _C._is_torch_function_enabled = _is_torch_function_enabled
    _C._is_torch_function_mode_enabled = _is_torch_function_mode_enabled
    _C._get_function_stack_at = lambda i: _mode_stack()[i]
    _C._len_torch_function_stack = lambda: len(_mode_stack())
    _C._push_on_torch_function_stack = _push_mode
    _C._pop_torch_function_stack = _pop_mode
    _install_namespace_wrappers()
