"""trainrun.library: operators written by users (PyTorch 2.4's custom-operator
API), callable as functions and as trainrun.ops.<namespace>.<name>.

    @trainrun.library.custom_op("mylib::mysin", mutates_args=())
    def mysin(x: Tensor) -> Tensor:
        return x.sin()

    @mysin.register_fake                 # shapes and dtypes only: meta tensors, capture
    def _(x):
        return trainrun.empty_like(x)

    mysin.register_autograd(backward, setup_context=setup_context)

An op's schema is inferred from the function's annotations (PyTorch's
spelling: `(Tensor(a0!) x, SymInt n) -> ()`), and every call is checked
against it: an argument of the wrong type, tensors on different devices, a
output that is one of the inputs or a view of one, or a backward through an
op with no autograd formula is an error that names the op and what was
wrong; opcheck also finds a tensor the op writes to without declaring it in
`mutates_args`. The kernel is
chosen by the device of the tensor arguments (register_kernel per device
type, the decorated function otherwise); meta tensors run the fake."""
import collections.abc
import inspect
from builtins import max as builtins_max
import typing

from trainrun import _C

__all__ = ["custom_op", "register_fake", "register_kernel", "register_autograd", "infer_schema", "opcheck",
           "CustomOpDef", "get_op", "get_ctx", "Library", "define", "impl", "impl_abstract"]

_registry = {}  # "ns::name" -> CustomOpDef


def _type_name(annotation, param_name, qualname):
    """PyTorch's schema type for an annotation (int is SymInt, as PyTorch infers it)."""
    import trainrun
    Tensor = _C.Tensor
    optional = False
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            annotation, optional = args[0], True
            origin = typing.get_origin(annotation)
    scalars = {int: "SymInt", float: "float", bool: "bool", str: "str", trainrun.dtype: "ScalarType",
               trainrun.device: "Device"}
    name = None
    if annotation is Tensor or (isinstance(annotation, type) and issubclass(annotation, Tensor)):
        name = "Tensor"
    elif annotation in scalars:
        name = scalars[annotation]
    elif origin in (list, tuple, collections.abc.Sequence):
        inner = typing.get_args(annotation)
        inner = [a for a in inner if a is not Ellipsis]
        if len(inner) == 1:
            element = _type_name(inner[0], param_name, qualname)
            if element in ("Tensor", "SymInt", "float", "bool"):
                name = element + "[]"
    if name is None:
        raise ValueError(f"infer_schema(func): Parameter {param_name} has unsupported type {annotation}"
                         f"{' (in ' + qualname + ')' if qualname else ''}. The valid types are: Tensor, "
                         "Optional[Tensor], Sequence[Tensor], int, float, bool, str, dtype, device, their Optional "
                         "forms and Sequence[int|float|bool]")
    return name + ("?" if optional else "")


def _return_type(annotation, qualname):
    if annotation is None or annotation is type(None):
        return "()"
    if typing.get_origin(annotation) is tuple:
        return "(" + ", ".join(_type_name(a, "return", qualname) for a in typing.get_args(annotation)) + ")"
    return _type_name(annotation, "return", qualname)


def infer_schema(prototype_function, /, *, mutates_args, op_name=None):
    """The schema string of a function from its type annotations, as PyTorch writes it."""
    sig = inspect.signature(prototype_function)
    hints = typing.get_type_hints(prototype_function)
    mutated = set(_mutated_names(mutates_args, sig))
    params = []
    for i, (name, p) in enumerate(sig.parameters.items()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"infer_schema(func): Parameter {name} cannot be *args or **kwargs. Got func with "
                             f"signature {sig})")
        if name not in hints:
            raise ValueError(f"infer_schema(func): Parameter {name} must have a type annotation. Got func with "
                             f"signature {sig})")
        type_name = _type_name(hints[name], name, op_name)
        if name in mutated:
            if not type_name.startswith("Tensor"):
                raise ValueError(f"infer_schema(func): Parameter {name} is in mutable_args but only Tensors or "
                                 f"collections of Tensors can be mutated")
            type_name = type_name.replace("Tensor", f"Tensor(a{i}!)", 1)
        text = f"{type_name} {name}"
        if p.default is not inspect.Parameter.empty:
            text += f"={p.default!r}" if not isinstance(p.default, str) else f'="{p.default}"'
        if p.kind is p.KEYWORD_ONLY and not any(x.startswith("*") for x in params):
            params.append("*")
        params.append(text)
    if mutates_args != "unknown":
        unknown = set(mutates_args) - set(sig.parameters)
        if unknown:
            raise ValueError(f"infer_schema(func): {sorted(unknown)} in mutates_args were not found in the "
                             f"custom op's signature. mutates_args should contain the names of all args that the "
                             f"custom op mutates, or just the string 'unknown' if you don't know.")
    if "return" not in hints:
        raise ValueError(f"infer_schema(func): No return type annotation was provided. Please add one. Got func "
                         f"with signature {sig})")
    return f"({', '.join(params)}) -> {_return_type(hints['return'], op_name)}"


def _mutated_names(mutates_args, sig):
    if mutates_args == "unknown":
        return [n for n, p in sig.parameters.items()]
    if isinstance(mutates_args, str):
        raise ValueError(f"custom_op: mutates_args must be a tuple, set or list of parameter names, or 'unknown'; "
                         f"got the string {mutates_args!r}")
    return list(mutates_args)


def _schema_arguments(schema):
    """[(type as written, name, default text or None, keyword-only)] of "(Tensor x, int[2] s=[1, 1], *, float a=1.0)
    -> Tensor": commas inside brackets and quotes stay in their argument."""
    if not schema.startswith("(") or ") ->" not in schema:
        raise ValueError(f"schema {schema!r} must look like '(Tensor x, int n) -> Tensor'")
    inside = schema[1:schema.rindex(") ->")]
    parts, depth, quote, start = [], 0, None, 0
    for i, c in enumerate(inside):
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(inside[start:i].strip())
            start = i + 1
    parts.append(inside[start:].strip())
    arguments, keyword_only = [], False
    for part in filter(None, parts):
        if part == "*":
            keyword_only = True
            continue
        declaration, _, default = part.partition("=")
        if " " not in declaration.strip():
            raise ValueError(f"schema {schema!r}: argument {part!r} needs a type and a name")
        type_name, name = declaration.strip().rsplit(" ", 1)
        arguments.append((type_name, name, default.strip() if default else None, keyword_only))
    return arguments


def _argument_types(schema):
    """[(type as written, base type, optional)] of a schema's arguments: "(Tensor(a0!) x, SymInt? n=None) -> ()"
    gives [("Tensor(a0!)", "Tensor", False), ("SymInt?", "SymInt", True)]."""
    types = [t for t, _, _, _ in _schema_arguments(schema)]
    return [(t, t.replace("(", " ").split(" ")[0].rstrip("?"), t.endswith("?")) for t in types]


def _split_name(qualname):
    if not isinstance(qualname, str) or qualname.count("::") != 1 or not all(qualname.split("::")):
        raise ValueError(f"custom_op: the name {qualname!r} must be 'namespace::name', e.g. 'mylib::mysin'")
    ns, name = qualname.split("::")
    if not ns.isidentifier() or not name.isidentifier():
        raise ValueError(f"custom_op: {qualname!r}: the namespace and the name must be Python identifiers")
    return ns, name


class CustomOpDef:
    """An operator made by custom_op: call it like its function."""

    def __init__(self, namespace, name, schema, fn, mutates_args):
        self._namespace, self._name = namespace, name
        self._qualname = f"{namespace}::{name}"
        self._schema = schema
        self._init_fn = fn
        self._signature = inspect.signature(fn)
        self._mutated = set(_mutated_names(mutates_args, self._signature))
        self._arg_types = _argument_types(schema)  # parsed once: every call checks against it
        self._kernels = {}  # device type -> function
        self._disabled = set()  # device types whose register_kernel kernel is off (set_kernel_enabled)
        self._fake = None
        self._backward = self._setup_context = None
        # Set by Library.impl: CompositeImplicitAutograd (runs as Python, autograd through its ops, every device)
        # and Autograd (called instead of the kernel when an input requires grad: it makes its own history).
        self._composite = self._autograd_kernel = None
        self.__name__, self.__doc__ = fn.__name__, fn.__doc__

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    # ---- registration ----------------------------------------------------------------------------------------
    def register_kernel(self, device_types, fn=None, /):
        """The kernel for these device types ("cpu", "cuda", or a list), instead of the decorated function."""
        types = [device_types] if isinstance(device_types, str) or device_types is None else list(device_types)

        def register(f):
            for t in types:
                self._kernels[t] = f
            return f
        return register if fn is None else register(fn)

    def register_fake(self, fn, /):
        """The fake: given meta tensors (or tensors), returns empty tensors of the outputs' shapes and dtypes."""
        self._fake = fn
        return fn

    def register_autograd(self, backward, /, *, setup_context=None):
        """backward(ctx, *grads) returns one gradient per argument of the op (None for those that need none);
        setup_context(ctx, inputs, output) saves what backward needs (ctx.save_for_backward, attributes)."""
        if not callable(backward):
            raise TypeError(f"register_autograd({self._qualname}): backward must be callable")
        if self._mutated:
            raise RuntimeError(f"register_autograd({self._qualname}): an op that mutates its inputs "
                               f"({', '.join(sorted(self._mutated))}) cannot have an autograd formula")
        self._backward, self._setup_context = backward, setup_context

    # ---- calls -----------------------------------------------------------------------------------------------
    def _bind(self, args, kwargs):
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self._qualname}(): {e}. Declaration: {self._qualname}{self._schema}") from None
        bound.apply_defaults()
        return bound

    def _check_arguments(self, bound):
        tensors, devices = [], set()
        for (name, value), (type_name, base, optional) in zip(bound.arguments.items(), self._arg_types):
            if value is None and optional:
                continue
            expected_tensor = base.startswith("Tensor")
            values = value if base.endswith("[]") and isinstance(value, (list, tuple)) else [value]
            for v in values:
                if expected_tensor and not _C._is_cpp_tensor(v):
                    raise RuntimeError(f"{self._qualname}() Expected a value of type '{type_name}' for argument "
                                    f"'{name}' but instead found type '{type(v).__name__}'. Declaration: "
                                    f"{self._qualname}{self._schema}")
                if _C._is_cpp_tensor(v):
                    tensors.append((name, v))
                    devices.add(v.device.type)
        if len(devices) > 1:
            raise RuntimeError(f"{self._qualname}(): expected all tensor arguments on one device type, got "
                               f"{', '.join(f'{n} on {t.device}' for n, t in tensors)}")
        return tensors, (devices.pop() if devices else "cpu")

    def set_kernel_enabled(self, device_type, enabled=True):
        """A context manager (or a plain call) that turns the kernel register_kernel gave `device_type` off (the
        decorated function runs instead) or back on; leaving the block restores what was."""
        was = device_type not in self._disabled
        (self._disabled.discard if enabled else self._disabled.add)(device_type)
        return _KernelEnabled(self, device_type, was)

    def _kernel_for(self, device_type):
        if device_type == "meta":
            if self._fake is None and self._schema.endswith("-> ()") and self._mutated:
                return _no_outputs  # (an op that only writes its arguments: nothing to describe, as torch's)
            if self._fake is None:
                raise RuntimeError(f"There was no fake impl registered for {self!r}. This is necessary for meta "
                                   f"tensors and graph capture to work. Please use `{self.__name__}.register_fake` "
                                   "to add an fake impl.")
            return self._fake
        if device_type in self._disabled:
            return self._init_fn
        return self._kernels.get(device_type, self._kernels.get(None, self._init_fn))

    def __call__(self, *args, **kwargs):
        for a in (*args, *kwargs.values()):  # a tensor subclass that handles custom ops itself (DTensor's sharding)
            handler = getattr(type(a), "_handle_custom_op", None)
            if handler is not None:
                return handler(self, args, kwargs)
        if _C._capture_active():  # inside trainrun.compile's recording: one opaque node
            return self._call_recorded(args, kwargs)
        if _C._profiler_active():  # one profiler event named "ns::name", as a dispatcher op's
            return self._call_profiled(args, kwargs)
        return self._call(args, kwargs)

    def _call_profiled(self, args, kwargs):
        """The call as one profiler event with its arguments' shapes and integer values, as an op's."""
        start, before = _C._profiler_now_ns(), _C._profiler_net_bytes()
        try:
            return self._call(args, kwargs)
        finally:
            values = [*args, *kwargs.values()]
            shapes = [list(v.shape) if _C._is_cpp_tensor(v) else [] for v in values]
            concrete = [[int(v)] if isinstance(v, int) else
                        list(v) if isinstance(v, (list, tuple)) and all(isinstance(i, int) for i in v) else []
                        for v in values]
            _C._profiler_add_event(self._qualname, start, _C._profiler_now_ns(), _C._profiler_net_bytes() - before,
                                   shapes, concrete)

    def _call_recorded(self, args, kwargs):
        """Runs the op as one node of the recording: its inner ops (and what they read into Python) are its own;
        a replay calls it again on the new tensors, the other arguments as recorded."""
        bound = self._bind(args, kwargs)
        slots = []  # (argument name, index in its list or None): where each tensor argument sits
        inputs = []
        for name, value in bound.arguments.items():
            if _C._is_cpp_tensor(value):
                slots.append((name, None))
                inputs.append(value)
            elif isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    if _C._is_cpp_tensor(v):
                        slots.append((name, i))
                        inputs.append(v)
        _C._external_begin()
        try:
            result = self._call(bound.args, bound.kwargs)
        except BaseException:
            _C._external_abort()
            raise
        flat = list(result) if isinstance(result, (tuple, list)) else [result]
        outputs = [o for o in flat if _C._is_cpp_tensor(o)]
        arguments = dict(bound.arguments)
        signature = self._signature

        def replay(tensors):
            new = dict(arguments)
            for (name, index), t in zip(slots, tensors):
                if index is None:
                    new[name] = t
                else:
                    items = list(new[name])
                    items[index] = t
                    new[name] = type(arguments[name])(items)
            call = inspect.BoundArguments(signature, new)
            out = self._call(call.args, call.kwargs)
            out = list(out) if isinstance(out, (tuple, list)) else [out]
            return [o for o in out if _C._is_cpp_tensor(o)]

        others = {k: v for k, v in arguments.items() if (k, None) not in slots}  # (what a replay keeps as is)
        _C._external_end(self._qualname, replay, inputs, outputs, key=f"{self._qualname}{_text_of(others)}")
        return result

    def _call(self, args, kwargs):
        bound = self._bind(args, kwargs)
        tensors, device_type = self._check_arguments(bound)
        if self._composite is not None:
            return self._composite(*bound.args, **bound.kwargs)
        needs_grad = _C.is_grad_enabled() and any(t.requires_grad for _, t in tensors)
        if needs_grad and self._autograd_kernel is not None and device_type != "meta":
            return self._autograd_kernel(*bound.args, **bound.kwargs)
        kernel = self._kernel_for(device_type)
        from trainrun._autograd import no_grad
        with no_grad():  # the kernel runs below autograd, as PyTorch's (its ops record nothing)
            if device_type == "meta":  # (the fake: get_ctx() answers inside it)
                _fake_ctx.append(_opcheck_fake_ctx[-1] if _opcheck_fake_ctx else FakeImplCtx())
                try:
                    output = kernel(*bound.args, **bound.kwargs)
                finally:
                    _fake_ctx.pop()
            else:
                output = kernel(*bound.args, **bound.kwargs)
        outputs = list(output) if isinstance(output, (tuple, list)) else [output]
        inputs = [t for _, t in tensors]
        for o in outputs:
            if _C._is_cpp_tensor(o) and any(o is t or _same_memory(o, t) for t in inputs):
                raise RuntimeError(f"{self._qualname}: The output of this custom operator (1) must not also be an "
                                   "input to this custom operator and (2) may not alias any inputs to this custom "
                                   "operator or other returns. Return a copy (x.clone()) instead.")
        if not needs_grad or device_type == "meta":
            return output
        return self._attach_backward(bound, inputs, output, outputs)

    def _attach_backward(self, bound, inputs, output, outputs):
        tensor_outputs = [o for o in outputs if _C._is_cpp_tensor(o) and o.dtype.is_floating_point]
        if not tensor_outputs:
            return output
        op, ctx = self, _Ctx()
        positions = [i for i, v in enumerate(bound.args) if _C._is_cpp_tensor(v)]
        ctx.needs_input_grad = tuple(_C._is_cpp_tensor(v) and v.requires_grad for v in bound.args)
        if self._setup_context is not None:
            self._setup_context(ctx, tuple(bound.args), output)

        def backward(*grads):
            if op._backward is None:
                raise RuntimeError(f"Trying to backward through {op._namespace}.{op._name}.default but no autograd "
                                   f"formula was registered. Please use register_autograd to add one.")
            result = op._backward(ctx, *grads)
            result = result if isinstance(result, (tuple, list)) else (result,)
            if len(result) != len(bound.args):
                raise RuntimeError(f"{op._qualname}: backward returned {len(result)} gradients, but the op takes "
                                   f"{len(bound.args)} arguments (return None for those that need none)")
            return tuple(result[i] for i in positions)

        attached = _C._attach_function_node(self._qualname.replace("::", "_"), inputs, tensor_outputs, backward)
        replaced = iter(attached)
        new = [next(replaced) if _C._is_cpp_tensor(o) and o.dtype.is_floating_point else o for o in outputs]
        # Outputs setup_context marked non-differentiable keep no history (their gradients reach backward as zeros).
        marked = getattr(ctx, "_non_differentiable", ())
        new = [n.detach() if any(n is m or o is m for m in marked) else n for n, o in zip(new, outputs)]
        return new[0] if not isinstance(output, (tuple, list)) else type(output)(new)


def _no_outputs(*args, **kwargs):
    return None


class _KernelEnabled:
    """set_kernel_enabled's result: as a context manager, puts the kernel's state back on exit."""

    def __init__(self, op, device_type, was):
        self._op, self._device_type, self._was = op, device_type, was

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._op.set_kernel_enabled(self._device_type, self._was)


class FakeImplCtx:
    """What get_ctx() returns inside a fake: new_dynamic_size() stands for an output size the data decides
    (nonzero's count). Meta tensors have no data, so a fake run on them cannot make one; opcheck's run can (its
    sizes are then checked for rank and dtype only)."""

    def __init__(self, for_opcheck=False):
        self._for_opcheck = for_opcheck
        self.dynamic_sizes_made = 0

    def new_dynamic_size(self, *, min=0, max=None):  # noqa: A002
        if min < 0 or (max is not None and max < min):
            raise ValueError(f"new_dynamic_size: expected 0 <= min <= max, got min={min}, max={max}")
        if not self._for_opcheck:
            raise RuntimeError("Attempted to make a data-dependent output size with meta tensors: a fake that calls "
                               "get_ctx().new_dynamic_size() runs in opcheck and graph capture (which run the "
                               "kernel on the data), not on meta tensors")
        self.dynamic_sizes_made += 1
        return max if max is not None else builtins_max(min, 2)

    create_unbacked_symint = new_dynamic_size


_fake_ctx = []  # the FakeImplCtx of the fake now running (innermost last)
_opcheck_fake_ctx = []  # opcheck's, while its test_faketensor runs


def get_ctx():
    """torch.library.get_ctx(): the context of the fake now running (register_fake's function)."""
    if not _fake_ctx:
        raise RuntimeError("get_ctx() was called outside a fake implementation (a function given to register_fake)")
    return _fake_ctx[-1]


def _text_of(arguments):
    """The custom op's non-tensor arguments as text (tensors, in lists too, as T): what two recordings compare."""
    def text(v):
        if _C._is_cpp_tensor(v):
            return "T"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(text(x) for x in v) + "]"
        return repr(v)
    return "(" + ", ".join(f"{k}={text(v)}" for k, v in arguments.items()) + ")"


def _same_memory(a, b):
    if a.device != b.device or a.device.type == "meta" or not a.numel() or not b.numel():
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


class _Ctx:
    """What setup_context leaves for backward (save_for_backward, saved_tensors, any attribute)."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        """Outputs that get no gradient: they come back without history."""
        self._non_differentiable = tensors


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """Makes fn an operator named "namespace::name" (a decorator when fn is None). mutates_args names the
    arguments fn writes to (() for none, "unknown" if unsure); device_types limits fn to those devices."""
    namespace, opname = _split_name(name)

    def make(f):
        inferred = schema if schema is not None else infer_schema(f, mutates_args=mutates_args, op_name=name)
        if name in _registry:
            raise RuntimeError(f"custom_op: an operator named {name!r} is already registered")
        op = CustomOpDef(namespace, opname, inferred, f, mutates_args)
        if device_types is not None:
            op._kernels.clear()
            op.register_kernel(device_types, f)
            op._init_fn = _refusing_kernel(op, device_types)
        _registry[name] = op
        from trainrun import _ops
        _ops._add(op)
        return op
    return make if fn is None else make(fn)


def _refusing_kernel(op, device_types):
    def kernel(*args, **kwargs):
        raise NotImplementedError(f"{op._qualname}: no kernel for this device; it has kernels for "
                                  f"{device_types!r} (register_kernel adds others)")
    return kernel


def get_op(qualname):
    """The custom op registered under "namespace::name" (KeyError naming it when there is none)."""
    if qualname not in _registry:
        raise KeyError(f"no custom operator named {qualname!r}; registered: {sorted(_registry)}")
    return _registry[qualname]


def _op_of(op):
    if isinstance(op, CustomOpDef):
        return op
    if hasattr(op, "_custom_op"):  # trainrun.ops.ns.name or its .default
        return op._custom_op
    return get_op(op)


def register_fake(op, fn=None, /, *, lib=None, _stacklevel=1):
    target = _op_of(op)
    return target.register_fake if fn is None else target.register_fake(fn)


def register_kernel(op, device_types, fn=None, /, *, lib=None):
    return _op_of(op).register_kernel(device_types, fn)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    _op_of(op).register_autograd(backward, setup_context=setup_context)


# opcheck, the checks of a custom op on sample arguments, builds on the above: _library_opcheck.py.
from trainrun._library_opcheck import opcheck  # noqa: E402,F401


# The schema-first API (Library, define, impl) builds on the above: _library_schema.py.
from trainrun._library_schema import Library, define, impl, impl_abstract  # noqa: E402,F401
