"""nn.Module as PyTorch's: subclass it in Python (assign Parameters and
child modules as attributes, write forward with any arguments), call it
with any arguments, hook it. Parameters and children are registered in C++
(nn::Module), so DDP and state_dict see them; hooks and calls with several
arguments run here, in Python."""
import functools
import weakref

from trainrun import _C
from trainrun.nn import _cpp_layers_functional
from trainrun.nn import _backward_hooks
from trainrun.nn import _named_views
from trainrun.nn._module_hooks import (_global_forward_hooks, _global_forward_pre_hooks, _with_global,
                                       register_backward_hook, register_forward_hook, register_forward_pre_hook,
                                       register_full_backward_hook, register_full_backward_pre_hook)
from trainrun.nn._state_version import _state_changed
from trainrun.nn.parameter import Parameter



def get_extra_state(self):
    """Override (with set_extra_state) to add a picklable value to state_dict under `<prefix>_extra_state`."""
    raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called. Please file "
                       "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to report "
                       "this bug.")


def set_extra_state(self, state):
    """Override (with get_extra_state) to take back the value get_extra_state put in state_dict."""
    raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called. Please file "
                       "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to report "
                       "this bug.")


_cpp_call = _C.nn.Module.__call__


def _call(self, *args, **kwargs):
    """Runs the forward pre-hooks, forward, then the forward hooks (each may replace what it sees); after
    module.compile(), through its compiled call."""
    compiled = self.__dict__.get("_compiled_call")
    if compiled is not None:
        return compiled(*args, **kwargs)
    return _call_eager(self, *args, **kwargs)


def _compile_in_place(self, **kwargs):
    """torch.nn.Module.compile: from now on this module's calls go through trainrun.compile (its __call__, hooks
    included), in place: the module, its attributes and its state_dict keys stay as they are."""
    from trainrun._compile import compiled_call
    compiled = compiled_call(self, functools.partial(_call_eager, self), **kwargs)
    if compiled is not None:
        self.__dict__["_compiled_call"] = compiled


def _call_eager(self, *args, **kwargs):
    pre = _with_global(self.__dict__.get("_forward_pre_hooks_py"), _global_forward_pre_hooks)
    post = _with_global(self.__dict__.get("_forward_hooks_py"), _global_forward_hooks)
    backward_hooked = _backward_hooks.has_backward_hooks(self)
    if pre or post or backward_hooked or "_forward_override" in self.__dict__:  # Python a replay would not run
        kind = "backward" if backward_hooked and not (pre or post) else "forward"
        _C._note_graph_break(f"a module with {kind} hooks ran (hooks are code a recorded graph does not run)")
    if pre:
        for hook, with_kwargs in list(pre.values()):
            if with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
    if backward_hooked:
        call_state, args = _backward_hooks.wrap_inputs(self, args)
    override = self.__dict__.get("_forward_override")  # set by tensor parallelism: computes on the shards
    if override is not None:
        output = override(*args, **kwargs)
    elif type(self).forward is _C.nn.Module.forward and "forward" not in self.__dict__ and \
            set(kwargs) <= {"input"} and all(_C._is_cpp_tensor(a) for a in args):
        if kwargs:  # layer(input=x): PyTorch's name for a C++ layer's one argument
            args = args + (kwargs["input"],)
        output = _cpp_call(self, *args)  # a C++ module: tensors in, a tensor (or a tuple) out, C++ hooks run
    elif "forward" not in self.__dict__ and not kwargs and \
            any(not _C._is_cpp_tensor(a) and hasattr(a, "to_local") for a in args) and \
            _cpp_layers_functional.has_functional_form(self):
        output = _cpp_layers_functional.functional_forward(self, args)  # a C++ layer given DTensors
    else:
        output = self.forward(*args, **kwargs)
    if post:
        for hook, with_kwargs in list(post.values()):
            result = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            if result is not None:
                output = result
    if backward_hooked:
        output = _backward_hooks.wrap_outputs(call_state, output)
    return output


def _is_buffer(module, name):
    return any(n == name for n, _ in module.named_buffers(False))


def _fills_buffer(module, name, value):
    """Whether value, a tensor, goes to a buffer registered as None (register_buffer(name, None)); registers it."""
    if isinstance(value, Parameter) or name not in module.__dict__.get("_none_buffers", ()):
        return False
    persistent = name not in module.__dict__.get("_non_persistent_buffers_set", ())
    module.register_buffer(name, value, persistent=persistent)
    return True


def _registers_itself(value):
    """A parameter of another kind than a tensor (nn.Parameter(dtensor)): its class registers it."""
    return not _C._is_cpp_tensor(value) and getattr(value, "_is_param", False) is True and \
        hasattr(type(value), "_register_as_parameter")


_cpp_register_parameter = _C.nn.Module.register_parameter


def _register_parameter(self, name, param, requires_grad=None):
    """PyTorch's register_parameter(name, param): None reads back as None until a Parameter is assigned (a
    layer without bias); a DTensor parameter registers its local piece and shows the DTensor (its class's
    `_register_as_parameter`); a tensor registers with its own requires_grad unless told otherwise."""
    if param is None:
        if name in dict(self._named_local_parameters(False)):
            raise KeyError(f"register_parameter: '{name}' is already a parameter (assign None to remove it)")
        object.__setattr__(self, name, None)
        self.__dict__.setdefault("_none_parameters", set()).add(name)  # (module._parameters lists it as None)
        return None
    register = getattr(type(param), "_register_as_parameter", None)
    if register is not None and not _C._is_cpp_tensor(param):
        return register(param, self, name)
    if not _C._is_cpp_tensor(param):
        raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                        "(nn.Parameter or None required)")
    if self.__dict__.get(name, 0) is None:
        del self.__dict__[name]  # the None placeholder gives way to the parameter
        self.__dict__.get("_none_parameters", set()).discard(name)
    registered = _cpp_register_parameter(self, name, param, param.requires_grad if requires_grad is None else
                                         requires_grad)
    remember(param)
    return registered


_C.nn.Module.register_parameter = _register_parameter


def _assigns_registered(module, name, value):
    """module.name = value where the value goes to the registry (any module, C++ or Python): a DTensor
    parameter, a tensor for a buffer (registered as None, or replaced: `self.steps = self.steps + 1`), a tensor
    for an existing parameter's name (tying: `head.weight = embedding.weight`), a new Parameter. False: not
    this kind of assignment."""
    if _registers_itself(value):
        module.register_parameter(name, value)
    elif getattr(value, "_is_buffer", False) is True:  # nn.Buffer(t, persistent=...)
        module.register_buffer(name, value, persistent=value.persistent)
    elif not _C._is_cpp_tensor(value):
        return False
    elif _fills_buffer(module, name, value):
        pass
    elif not isinstance(value, Parameter) and _is_buffer(module, name):
        module._replace_buffer(name, value)
        remember(value)
    elif name in dict(module._named_local_parameters(False)):
        module._replace_parameter(name, value)
        remember(value)
    elif isinstance(value, Parameter):
        module.register_parameter(name, value, value.requires_grad)
    else:
        return False
    return True


def _cpp_setattr(self, name, value):
    """module.name = value on any module: a Parameter registers (or replaces) a parameter, a tensor assigned
    to an existing parameter's name replaces it (tying weights: `head.weight = embedding.weight`), a module
    becomes a child; anything else is a plain attribute."""
    _state_changed(self, name)
    if _assigns_registered(self, name, value):
        pass
    elif isinstance(value, _C.nn.Module) and not isinstance(self, Module):
        if not self._replace_module(name, value):  # a child replaced keeps its place (and state_dict order)
            _register_child(self, name, value)
        object.__setattr__(self, name, value)  # keeps a Python subclass (and its forward) alive
    else:
        object.__setattr__(self, name, value)


_C.nn.Module.__call__ = _call
_C.nn.Module.compile = _compile_in_place
_C.nn.Module.__setattr__ = _cpp_setattr
_cpp_train, _cpp_eval = _C.nn.Module.train, _C.nn.Module.eval


def _train(self, mode=True):
    _state_changed()
    return _cpp_train(self, mode)


def _eval(self):
    _state_changed()
    return _cpp_eval(self)


_C.nn.Module.train, _C.nn.Module.eval = _train, _eval
_cpp_to = _C.nn.Module.to


def _to(self, *args, device=None, dtype=None, non_blocking=False, memory_format=None):
    """PyTorch's Module.to: to(device), to(dtype), to(device, dtype), to(tensor) (its device and dtype), the same
    as keywords. Returns the module. memory_format= is checked and the parameters keep their layout: PyTorch
    re-lays them out in place (`param.data = ...`), which trainrun cannot do to a tensor without replacing it, and
    a replaced parameter would leave an optimizer made before holding the old one. Kernels read any strides, so
    the results are the same; inputs in channels_last work as they are."""
    if len(args) > 2:
        raise TypeError(f"to() takes at most 2 positional arguments ({len(args)} given)")
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif _C._is_cpp_tensor(a):
            device, dtype = a.device, a.dtype
        else:
            device = a
    if dtype is not None and not (dtype.is_floating_point or getattr(dtype, "is_complex", False)):
        raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}")
    if device is not None:
        _cpp_to(self, device)
    if dtype is not None:
        _cpp_to(self, dtype)
    if memory_format is not None:
        from trainrun import _memory_format
        if memory_format not in _memory_format.FORMATS:
            raise TypeError(f"to(): memory_format must be a torch.memory_format, got {memory_format!r}")
    return self


_C.nn.Module.to = _to
_C.nn.Module.register_forward_pre_hook = register_forward_pre_hook
_C.nn.Module.register_forward_hook = register_forward_hook
_C.nn.Module.register_full_backward_hook = register_full_backward_hook
_C.nn.Module.register_full_backward_pre_hook = register_full_backward_pre_hook
_C.nn.Module.register_backward_hook = register_backward_hook
_C.nn.Module.get_extra_state, _C.nn.Module.set_extra_state = get_extra_state, set_extra_state


class Module(_C.nn.Module):
    """torch.nn.Module: attributes that are Parameters become parameters,
    attributes that are modules become children (in C++, so that DDP and
    state_dict see them); forward is yours, with any arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__(type(self).__name__)
        object.__setattr__(self, "_children_py", {})

    def __setattr__(self, name, value):
        _state_changed(self, name)
        if value is None and name in self.__dict__.get("_children_py", {}):
            self._unregister(name)  # torch's `model.tok_embeddings = None`: the child is gone, the name reads None
            self._children_py[name] = None
        elif _assigns_registered(self, name, value):
            pass
        elif isinstance(value, _C.nn.Module):
            if "_children_py" not in self.__dict__:
                raise AttributeError("call super().__init__() before assigning modules")
            if self._children_py.get(name) is None or not self._replace_module(name, value):
                _register_child(self, name, value)  # (a new child; one replaced keeps its place, as in PyTorch)
            self._children_py[name] = value  # keeps a Python subclass (and its forward) alive
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        """torch's `del module.name` for a child, parameter or buffer (other attributes as any object's)."""
        _state_changed(self, name)
        children = self.__dict__.get("_children_py", {})
        if name in children:
            del children[name]
            self._unregister(name)
        elif not self._unregister(name):
            object.__delattr__(self, name)

    def __getattr__(self, name):
        children = self.__dict__.get("_children_py", {})
        if name in children:
            return children[name]
        return super().__getattr__(name)  # parameters and buffers, from the C++ registry

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")


# ---- the rest of torch.nn.Module's methods, for C++ layers and Python modules alike ----------------
def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    """(name, module) for this module and every descendant, depth first, each once."""
    memo = set() if memo is None else memo
    if remove_duplicate and id(self) in memo:
        return
    memo.add(id(self))
    yield prefix, self
    for name, child in self.named_children():
        yield from named_modules(child, memo, prefix + ("." if prefix else "") + name, remove_duplicate)


def _apply_fn(self, fn):
    """fn(module) on every descendant and then on this module (PyTorch's order); returns self."""
    for child in self.children():
        child.apply(fn)
    fn(self)
    return self


# Called as hook(modules, replaced) after `modules` were given new tensors (replaced: the old tensor's _cdata ->
# its new tensor) by to_empty or load_state_dict(assign=True): the layers above nn that hold on to parameters
# (DTensor views, fully_shard's shards) re-point at the new ones.
TENSORS_REPLACED_HOOKS = []


def replace_tensors(modules, replaced):
    """Every parameter and buffer of `modules` whose tensor is a key of `replaced` becomes its new tensor (one
    tensor tied to several modules stays one), then the hooks above run."""
    for m in modules:
        for name, p in list(m._named_local_parameters("", False)):
            if p._cdata in replaced:
                m._replace_parameter(name, replaced[p._cdata])
        for name, b in list(m.named_buffers("", False)):
            if b._cdata in replaced:
                m._replace_buffer(name, replaced[b._cdata])
    for hook in TENSORS_REPLACED_HOOKS:
        hook(modules, replaced)


def _to_empty(self, *, device, recurse=True):
    """PyTorch's Module.to_empty: every parameter and buffer becomes an uninitialised tensor of its shape and
    dtype on `device`; how a model built under `with trainrun.device("meta")` gets memory (then initialise
    it: reset_parameters(), nn.init). A parameter tied to several modules stays one tensor, and a sharded one
    (fully_shard, tensor parallelism) keeps its layout: only this rank's shard is allocated."""
    from trainrun.nn import utils as nn_utils
    replaced = {}
    modules = list(self.modules()) if recurse else [self]
    for m in modules:
        for t in [p for _, p in m._named_local_parameters("", False)] + [b for _, b in m.named_buffers("", False)]:
            if t._cdata not in replaced:
                new = _C.empty(list(t.shape), dtype=t.dtype, device=device)
                if t.requires_grad:
                    new.requires_grad_(True)
                replaced[t._cdata] = new
                nn_utils._moved(t, new)
    replace_tensors(modules, replaced)
    return self


def _type(self, dst_type):
    """Every parameter and buffer cast to dst_type (a dtype, or a legacy type such as torch.DoubleTensor)."""
    if isinstance(dst_type, type) and hasattr(dst_type, "dtype"):
        dst_type = dst_type.dtype
    return self.to(dst_type)


_C.nn.Module.type = _type


def _requires_grad_(self, requires_grad=True):
    for _, p in self._named_local_parameters():
        p.requires_grad_(requires_grad)
    return self


def _share_memory(self):
    """Moves every parameter, gradient and buffer into shared memory (Hogwild training across processes)."""
    for _, p in self._named_local_parameters():
        p.share_memory_()
        if p.grad is not None:
            p.grad.share_memory_()
    for _, b in self.named_buffers():
        b.share_memory_()
    return self


def _get_submodule(self, target):
    module = self
    for part in target.split(".") if target else []:
        children = dict(module.named_children())
        if part not in children:
            raise AttributeError(f"{module.type_name} has no submodule '{part}' (looking up '{target}')")
        module = children[part]
    return module


def _set_submodule(self, target, module, strict=False):
    """Replaces (or, unless strict, adds) the submodule at the dotted path target."""
    if not target:
        raise ValueError("Cannot set the submodule without a target name!")
    path, _, name = target.rpartition(".")
    parent = _get_submodule(self, path)
    if strict and name not in dict(parent.named_children()):
        raise AttributeError(f"{type(parent).__name__} has no attribute `{name}`")
    setattr(parent, name, module)


def _get_parameter(self, target):
    path, _, name = target.rpartition(".")
    params = dict(_get_submodule(self, path).named_parameters(False))
    if name not in params:
        raise AttributeError(f"no parameter '{target}'")
    return params[name]


def _get_buffer(self, target):
    path, _, name = target.rpartition(".")
    buffers = dict(_get_submodule(self, path).named_buffers(recurse=False))
    if name not in buffers:
        raise AttributeError(f"no buffer '{target}'")
    return buffers[name]


def _repr(self):
    """PyTorch's layout: the extra_repr inline when it is one line and there are no children, else a line
    each for extra_repr's lines and then the children, indented."""
    extra = self.extra_repr()
    extra_lines = extra.split("\n") if extra else []
    child_lines = [f"({name}): " + repr(child).replace("\n", "\n  ") for name, child in self.named_children()]
    head = f"{self._get_name()}("
    if len(extra_lines) == 1 and not child_lines:
        return head + extra_lines[0] + ")"
    if not extra_lines and not child_lines:
        return head + ")"
    return head + "\n  " + "\n  ".join(extra_lines + child_lines) + "\n)"


_C.nn.Module.named_modules = named_modules
_C.nn.Module._get_name = lambda self: type(self).__name__  # (what repr() prints: PyTorch's hook for wrappers)
_C.nn.Module.modules = lambda self: (m for _, m in named_modules(self))
_C.nn.Module.children = lambda self: (m for _, m in self.named_children())
_C.nn.Module.apply = _apply_fn
_C.nn.Module.requires_grad_ = _requires_grad_
_C.nn.Module.share_memory = _share_memory
_C.nn.Module.to_empty = _to_empty
_register_child = _C.nn.Module.register_module  # (the core's: refuses a name that is taken)
_C.nn.Module.add_module = lambda self, name, module: setattr(self, name, module)
_C.nn.Module.register_module = _C.nn.Module.add_module  # PyTorch's alias: a child of that name is replaced
_C.nn.Module.register_module_ = _C.nn.Module.add_module
_C.nn.Module.get_submodule = _get_submodule
_C.nn.Module.set_submodule = _set_submodule
_C.nn.Module.get_parameter = _get_parameter
_C.nn.Module.get_buffer = _get_buffer
_named_views.install(_C.nn.Module)
_C.nn.Module.extra_repr = lambda self: ""
_C.nn.Module.__repr__ = _repr
for _name, _dtype in (("half", _C.dtype.float16), ("float", _C.dtype.float32), ("double", _C.dtype.float64),
                      ("bfloat16", _C.dtype.bfloat16)):
    setattr(_C.nn.Module, _name, (lambda d: lambda self: self.to(d))(_dtype))


# ---- parameters and buffers as PyTorch hands them out: generators, with prefix= and remove_duplicate= ----
# _cdata -> the Python object handed out for a registered tensor, while some caller holds it: module.weight is
# module.weight, and a dict keyed by parameters (optimizer-in-backward, param -> name maps) finds them again, as in
# PyTorch. (The C++ registry hands out a new handle per read.)
_handed_out = weakref.WeakValueDictionary()


def remember(t):
    """t was just registered (module.weight = t, register_parameter, register_buffer): reading it back gives t
    itself, as in PyTorch (`model.head.weight = w; model.head.weight is w`), while t lives."""
    if _C._is_cpp_tensor(t):
        _handed_out[t._cdata] = t


def _as_parameter(t):
    """A parameter read back from the C++ registry comes as a plain handle: give it the Parameter class
    (the same tensor, not a copy), so isinstance(p, nn.Parameter) holds as in PyTorch; the object handed out
    before, while it lives."""
    if type(t) is not _C.Tensor:
        return t
    known = _handed_out.get(t._cdata)
    if known is not None:
        return known
    parameter = t.as_subclass(Parameter)
    _handed_out[t._cdata] = parameter
    return parameter


def _as_buffer(t):
    """A registered buffer: the object handed out before, while it lives (module.running_mean is itself)."""
    if type(t) is not _C.Tensor:
        return t
    return _handed_out.setdefault(t._cdata, t)


def _named_tensors(cpp_named, kind):
    wrap = _as_parameter if kind == "parameters" else _as_buffer

    def named(self, prefix="", recurse=True, remove_duplicate=True):
        if isinstance(prefix, bool):  # named_parameters(False): the recurse flag given first
            prefix, recurse = "", prefix
        lead = prefix + "." if prefix else ""
        return ((lead + name, wrap(t)) for name, t in cpp_named(self, recurse, remove_duplicate))
    named.__name__ = f"named_{kind}"
    named.__doc__ = (f"(name, tensor) for every {kind[:-1]}, depth first; a tensor registered under several "
                     "names (tied weights) once, unless remove_duplicate=False.")
    return named


_cpp_parameters, _cpp_named_buffers = _C.nn.Module.parameters, _C.nn.Module.named_buffers


def _registry_tensors(self):
    """Every parameter then every buffer the C++ registry holds, depth first, each once, as the plain handles it
    gives (no Parameter objects made): what a compiled module's replay reads, fetched at each call."""
    return _cpp_parameters(self, True) + [t for _, t in _cpp_named_buffers(self, True, True)]


_C.nn.Module._registry_tensors = _registry_tensors
_C.nn.Module.named_parameters = _named_tensors(_C.nn.Module.named_parameters, "parameters")
# The tensors the registry holds, whatever a distributed layer shows in their place (named_parameters gives a
# sharded parameter as its DTensor once tensor parallelism or fully_shard made one): what nn's own code changes.
_C.nn.Module._named_local_parameters = _C.nn.Module.named_parameters
_C.nn.Module.named_buffers = _named_tensors(_C.nn.Module.named_buffers, "buffers")
_C.nn.Module.parameters = lambda self, recurse=True: (p for _, p in self.named_parameters("", recurse))
_C.nn.Module.buffers = lambda self, recurse=True: (b for _, b in self.named_buffers("", recurse))
