"""trainrun.library's older, schema-first API, as PyTorch's: a Library declares ops from schema strings
("scale(Tensor x, float s=2.0) -> Tensor") and registers their kernels per dispatch key; define() and impl() do
the same by qualified name. The ops are trainrun.library's CustomOpDefs (library.py), callable as
trainrun.ops.<ns>.<name>, with register_fake and register_autograd as for custom_op's."""
import ast
import inspect
import weakref

from trainrun import _library_builtin, _ops
from trainrun.library import (CustomOpDef, _op_of, _registry, _schema_arguments, _split_name, get_op,
                              register_fake)

__all__ = ["Library", "define", "impl", "impl_abstract"]


def _parse_default(text, schema):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"schema {schema!r}: cannot read the default {text!r}") from None


def _signature_from_schema(schema):
    parameters = []
    for _, name, default, keyword_only in _schema_arguments(schema):
        if not name.isidentifier():
            raise ValueError(f"schema {schema!r}: {name!r} is not a valid argument name")
        kind = inspect.Parameter.KEYWORD_ONLY if keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        value = inspect.Parameter.empty if default is None else _parse_default(default, schema)
        parameters.append(inspect.Parameter(name, kind, default=value))
    try:
        return inspect.Signature(parameters)
    except ValueError as e:
        raise ValueError(f"schema {schema!r}: {e}") from None


def _define(qualname, schema):
    """A CustomOpDef from a schema, with no kernel yet (impl adds them)."""
    namespace, name = _split_name(qualname)
    signature = _signature_from_schema(schema)
    mutated = [n for t, n, _, _ in _schema_arguments(schema) if "!" in t]

    def no_kernel(*args, **kwargs):
        raise NotImplementedError(f"{qualname}: no kernel is registered for this device (Library.impl or "
                                  "trainrun.library.impl adds one)")
    no_kernel.__signature__ = signature
    no_kernel.__name__ = name
    if qualname in _registry:
        raise RuntimeError(f"define: an operator named {qualname!r} is already registered")
    op = CustomOpDef(namespace, name, schema, no_kernel, mutated)
    _registry[qualname] = op
    _ops._add(op)
    return op


# dispatch keys (and device types) as Library.impl and impl take them
_DEVICE_KEYS = {"cpu": "cpu", "CPU": "cpu", "cuda": "cuda", "CUDA": "cuda"}
_DEFAULT_KEYS = {"", "default", "CompositeExplicitAutograd"}


def _impl(op, fn, dispatch_key):
    if not callable(fn):
        raise TypeError(f"impl({op._qualname}): expected a function, got {type(fn).__name__}")
    if dispatch_key in _DEVICE_KEYS:
        op.register_kernel(_DEVICE_KEYS[dispatch_key], fn)
    elif dispatch_key in _DEFAULT_KEYS:
        op._init_fn = fn
    elif dispatch_key == "Meta":
        op.register_fake(fn)
    elif dispatch_key == "CompositeImplicitAutograd":
        op._composite = fn
    elif dispatch_key in ("Autograd", "AutogradCPU", "AutogradCUDA"):
        op._autograd_kernel = fn
    else:
        raise ValueError(f"impl({op._qualname}): dispatch key {dispatch_key!r} is not supported; use one of "
                         f"{sorted(set(_DEVICE_KEYS) | _DEFAULT_KEYS - {''})}, Meta, CompositeImplicitAutograd, "
                         "Autograd")


_def_namespaces = {}  # namespace -> the Library("ns", "DEF") that owns it


class Library:
    """torch.library.Library(ns, kind): kind "DEF" owns the namespace (one per program), "FRAGMENT" adds
    definitions to it, "IMPL" only adds kernels (dispatch_key: the one impl uses when given none). Operators
    defined through a library are removed with it (when it is deleted or collected), as PyTorch's."""

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError(f"Library: unsupported kind {kind!r}; expected 'DEF', 'IMPL' or 'FRAGMENT'")
        if not isinstance(ns, str) or not ns.isidentifier():
            raise ValueError(f"Library: the namespace {ns!r} must be a Python identifier")
        if kind == "DEF":
            owner = _def_namespaces.get(ns)
            if owner is not None and owner() is not None:
                raise RuntimeError(f"Only a single TORCH_LIBRARY can be used to register the namespace {ns}; "
                                   "use Library(ns, 'FRAGMENT') to add to it")
            _def_namespaces[ns] = weakref.ref(self)
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._defined = []  # qualnames this library defined
        self._builtin_kernels = []  # (op, backend) of built-in ops' kernels it replaced (_library_builtin.py)
        self._finalizer = weakref.finalize(self, Library._remove_ops, self._defined, ns, kind == "DEF",
                                           self._builtin_kernels)

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})"

    @staticmethod
    def _remove_ops(defined, ns, owns_namespace, builtin_kernels=()):
        for name, backend in builtin_kernels:
            _library_builtin.remove(name, backend)
        for qualname in defined:
            op = _registry.pop(qualname, None)
            if op is not None:
                _ops._remove(op)
        if owns_namespace and ns in _def_namespaces and _def_namespaces[ns]() is None:
            del _def_namespaces[ns]

    def _destroy(self):
        self._finalizer()

    def define(self, schema, alias_analysis="", *, tags=()):
        """Declares "name(Tensor x, int n=1) -> Tensor" in this namespace; returns the name. Call it as
        trainrun.ops.<ns>.<name>; impl gives it kernels, register_fake/register_autograd the rest."""
        if self.kind == "IMPL":
            raise RuntimeError(f"Library({self.ns!r}, 'IMPL'): define needs a 'DEF' or 'FRAGMENT' library")
        if not isinstance(schema, str) or "(" not in schema:
            raise ValueError(f"define: schema {schema!r} must look like 'name(Tensor x) -> Tensor'")
        name, rest = schema.split("(", 1)
        name = name.strip()
        if "." in name:
            raise ValueError(f"define: {name!r}: overload names are not supported (one overload, .default, per op)")
        _define(f"{self.ns}::{name}", "(" + rest)
        self._defined.append(f"{self.ns}::{name}")
        return name

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False):
        """Registers fn as op_name's kernel for dispatch_key (this library's default when empty): CPU, CUDA (or
        cpu, cuda), CompositeExplicitAutograd (every device; backward via register_autograd), Meta (the fake),
        CompositeImplicitAutograd (plain Python: autograd goes through its ops), Autograd (called when an input
        requires grad, making its own history: an autograd.Function's apply)."""
        if with_keyset:
            raise NotImplementedError("Library.impl: with_keyset=True is not supported (kernels take no key set)")
        if isinstance(op_name, str):
            qualname = op_name if "::" in op_name else f"{self.ns}::{op_name}"
            if _library_builtin.is_builtin(qualname, _registry):
                # one of trainrun's own ops (aten's): its kernel for a device is replaced while the library lives
                self._builtin_kernels.append(_library_builtin.register(qualname, fn,
                                                                       dispatch_key or self.dispatch_key))
                return
            op = get_op(qualname.split(".")[0])
        else:
            op = _op_of(op_name)
        _impl(op, fn, dispatch_key or self.dispatch_key)


_kept_libraries = []  # the libraries define() and impl() make: they live as long as the program


def define(qualname, schema, *, lib=None, tags=()):
    """torch.library.define("mylib::foo", "(Tensor x) -> Tensor"): declares the op (kernels come from impl)."""
    ns, name = _split_name(qualname)
    if lib is None:
        lib = Library(ns, "FRAGMENT")
        _kept_libraries.append(lib)
    lib.define(name + schema, tags=tags)


def impl(qualname, types=None, func=None, *, lib=None):
    """torch.library.impl("mylib::foo", "cpu"): registers func (a decorator when func is None) for device types
    ("cpu", "cuda", a list of them) or a dispatch key (Library.impl says which). The older form
    impl(lib, "foo", "CPU") is a decorator too."""
    if isinstance(qualname, Library):
        library, name, key = qualname, types, func if func is not None else ""
        return lambda f: (library.impl(name, f, key), f)[1]
    keys = [types] if isinstance(types, str) else list(types or [""])
    if isinstance(qualname, str) and _library_builtin.is_builtin(qualname, _registry):  # (an aten op)
        library = lib
        if library is None:
            library = Library("aten", "IMPL")
            _kept_libraries.append(library)

        def register_builtin(f):
            for key in keys:
                library.impl(qualname, f, key)
            return f
        return register_builtin if func is None else register_builtin(func)
    op = _op_of(qualname)

    def register(f):
        for key in keys:
            _impl(op, f, key)
        return f
    return register if func is None else register(func)


def impl_abstract(qualname, func=None, *, lib=None, _stacklevel=1):
    """The older name of register_fake."""
    return register_fake(qualname, func, lib=lib)
