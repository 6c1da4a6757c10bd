"""The Python values a recording bakes in, as guards: a replay does not run the Python code, so a number the code
read from a module attribute (`x * self.scale`), a global (`x * SCALE`) or a closure variable, or a flag it
branched on (`if self.use_relu`), is part of the recording. trainrun.compile keys its recordings on them too, as
torch.compile's guards do, so that changing one records anew instead of replaying stale code. A tensor reached the
same ways is an input of the recording instead (as torch.compile lifts it), so that a replay reads the tensor the
name holds at that call.

What is guarded, read at each call:
- for a module: every submodule's training flag, structure, and the plain attributes (numbers, strings, None,
  functions, tuples of those) whose names its class's code mentions, and its extra_repr() (trainrun's own
  layers' configuration: Dropout's p). These are read again only after some module's attribute was set or
  train()/eval() ran (trainrun.nn counts those), so a steady training loop pays one integer compare (a read
  costs about 2.5 us per submodule);
- for a function (and a module's Python forwards): the globals its code names that hold plain values or
  tensors, and its closure variables that do.

Values the code reaches otherwise (an element of a global dict, an attribute of some other object) are not seen:
they stay as recorded, as the module docstring of trainrun._compile says."""
import types

from trainrun import _C
from trainrun.nn._module_hooks import hooks_state

_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_CALLABLE = (types.FunctionType, types.BuiltinFunctionType)
_SKIP = object()  # a value that is not guarded (its position still counts)


def _plain(value):
    """value as a guard, or _SKIP: plain values as they are, functions by identity, tuples of those."""
    if isinstance(value, _PLAIN) or isinstance(value, _CALLABLE) or isinstance(value, (_C.dtype, _C.device)):
        return value
    if type(value) is tuple and len(value) <= 64:  # (not lists: the code may be what appends to them)
        items = tuple(_plain(v) for v in value)
        return _SKIP if any(v is _SKIP for v in items) else items
    return _SKIP


def _code_names(code, names):
    """Every name (global or attribute) the code object and the code nested in it mention."""
    names.update(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_names(const, names)
    return names


def _function_of(fn):
    """The Python function behind a callable (bound method, functools.partial), or None."""
    for _ in range(8):
        if isinstance(fn, types.FunctionType):
            return fn
        fn = getattr(fn, "__func__", None) or getattr(fn, "func", None)
        if fn is None:
            return None
    return None


_class_names = {}  # a module class: the names its own Python code (up to trainrun's Module) mentions


def _names_of_class(cls):
    names = _class_names.get(cls)
    if names is None:
        names = set()
        for klass in cls.__mro__:
            if klass.__module__.startswith("trainrun.") or klass is object:
                continue  # trainrun's own modules: their attributes are configuration read through extra_repr
            for value in vars(klass).values():
                fn = _function_of(value) or _function_of(getattr(value, "fget", None))
                if fn is not None:
                    _code_names(fn.__code__, names)
        _class_names[cls] = names
    return names


def _config_of(module):
    """A layer's configuration as it prints it (trainrun's own layers keep theirs in C++ or in attributes their
    extra_repr names: Dropout's p); "" when extra_repr fails."""
    try:
        return module.extra_repr()
    except Exception:  # noqa: BLE001  (a user's extra_repr: not worth failing the call over)
        return ""


_TENSOR = ("tensor",)  # a guard's mark for a value that is a tensor: the tensor itself is an input of the recording


def _value(value, tensors):
    """value as a guard: a tensor goes to `tensors` (an input of the recording, guarded by its metadata like the
    arguments) and reads as _TENSOR; the rest as _plain says."""
    if _C._is_cpp_tensor(value):
        tensors.append(value)
        return _TENSOR
    return _plain(value)


def _guarded(value):
    return _C._is_cpp_tensor(value) or _plain(value) is not _SKIP


def _module_state(module):
    """Per submodule: its name, class, training flag, configuration and the attributes its code can read, and
    those attributes that are tensors (not parameters or buffers: `self.mask = torch.tril(...)`)."""
    state, tensors = [], []
    for name, m in module.named_modules():
        names = _names_of_class(type(m))
        attrs = tuple((k, v) for k, v in ((k, _value(v, tensors)) for k, v in vars(m).items() if k in names)
                      if v is not _SKIP)
        state.append((name, type(m), m.training, attrs, _config_of(m), hooks_state(m)))
    return tuple(state), tensors


class GlobalsGuard:
    """The globals and closure variables of a set of functions that hold plain values or tensors, read at each
    call."""

    def __init__(self, functions):
        self._reads = []  # (globals dict, name) pairs, each once
        self._cells = []
        seen = set()
        for fn in functions:
            fn = _function_of(fn)
            if fn is None:
                continue
            for name in sorted(_code_names(fn.__code__, set())):
                key = (id(fn.__globals__), name)
                value = fn.__globals__.get(name, _SKIP)
                # Modules, classes and other objects are not guarded; keep the per-call work to what is.
                if key not in seen and value is not _SKIP and _guarded(value):
                    seen.add(key)
                    self._reads.append((fn.__globals__, name))
            self._cells += [c for c in (fn.__closure__ or ()) if _guarded(_cell_value(c))]

    def __call__(self, tensors):
        if not self._reads and not self._cells:
            return ()
        return (tuple(_value(g.get(name, _SKIP), tensors) for g, name in self._reads) +
                tuple(_value(_cell_value(c), tensors) for c in self._cells))


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a variable not yet assigned)
        return _SKIP


class PythonGuard:
    """What a compiled function's recordings are keyed on besides its arguments and its module's parameters and
    buffers: call(tensors) gives a hashable value that changes when a baked-in Python value changes, and appends
    the tensors the code reaches through globals, closures and module attributes to `tensors`. Those are inputs of
    the recording, as torch.compile lifts them: a replay reads the tensor the name holds now."""

    def __init__(self, fn, module):
        from trainrun.nn import _state_version as nn_module
        self._nn = nn_module
        self._module = module
        functions = [fn]
        if module is not None:
            functions += [type(m).forward for m in module.modules() if not type(m).__module__.startswith("trainrun.")]
        self._globals = GlobalsGuard(functions)
        self._version = -1
        self._state, self._state_tensors = (), []

    def __call__(self, tensors):
        if self._module is not None and self._version != self._nn.state_version():
            self._version = self._nn.state_version()
            self._state, self._state_tensors = _module_state(self._module)
        tensors += self._state_tensors
        return self._state, self._globals(tensors)
