"""Kernels written in Python for trainrun's own ops, as torch.library's Library("aten", "IMPL").impl("div.Tensor",
fn, "CPU") registers them for aten ops: the op's kernel for that device becomes fn (autograd, autocast and graph
capture still run above it; python/csrc/python_kernel_bindings.cc). fn is called as the op's Python binding is,
with the op's positional arguments and its keyword-only ones that differ from their defaults as keywords (an
out= tensor receives fn's result); calling the same op inside fn reaches the op's own kernel. The kernel lasts as
long as the library that registered it."""
import ast

from trainrun import _C
from trainrun._op_list import ops
from trainrun.library import _schema_arguments

_BACKENDS = {"CPU": "CPU", "cpu": "CPU", "CUDA": "CUDA", "cuda": "CUDA", "Meta": "Meta", "meta": "Meta"}


def builtin_op_name(qualname):
    """The dispatcher's name of a built-in op given as torch names it ("aten::div.Tensor", "div.Tensor", "div"),
    or None when trainrun has no such op."""
    name = qualname.split("::", 1)[1] if qualname.startswith("aten::") else qualname
    if "::" in name:
        return None
    known = {op.name: op for op in ops()}
    for candidate in (name, name.split(".", 1)[0]):
        if candidate in known:
            return candidate
    return None


def is_builtin(qualname, custom_ops):
    """Whether a name given to impl is one of trainrun's own ops (any aten:: name, so an unknown one is refused
    naming it), not a custom op of `custom_ops`."""
    return qualname.split(".")[0] not in custom_ops and (qualname.startswith("aten::") or
                                                         builtin_op_name(qualname) is not None)


def _default(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):  # (a default that is no Python literal: compared as written)
        return text


_NO_DEFAULT = object()


def _calling_convention(schema):
    """Per argument of an op-list schema ("div(Tensor self, ...) -> Tensor"), in order: (name, keyword-only,
    default or _NO_DEFAULT)."""
    return [(name, keyword_only, _NO_DEFAULT if default is None else _default(default))
            for _, name, default, keyword_only in _schema_arguments(schema[schema.index("("):])]


def register(qualname, fn, dispatch_key):
    """Makes fn the kernel of a built-in op for a device key; returns (op name, backend) to remove it by."""
    name = builtin_op_name(qualname)
    if name is None:
        raise ValueError(f"impl: {qualname!r} is neither a custom op nor an op of trainrun's (trainrun._C._op_list() "
                         "lists them)")
    if dispatch_key not in _BACKENDS:
        raise NotImplementedError(f"impl({qualname!r}): a kernel for a built-in op is registered for a device "
                                  f"(CPU, CUDA or Meta), not {dispatch_key!r}")
    if not callable(fn):
        raise TypeError(f"impl({qualname!r}): expected a function, got {type(fn).__name__}")
    schema = next(op.schema for op in ops() if op.name == name)
    convention = _calling_convention(schema)

    def kernel(values):
        args, kwargs, out = [], {}, None
        for (arg, keyword_only, default), value in zip(convention, values):
            if arg == "out":
                out = value
            elif not keyword_only:
                args.append(value)
            elif default is _NO_DEFAULT or value != default:
                kwargs[arg] = value
        result = fn(*args, **kwargs)
        if out is not None:
            out.copy_(result)
            return out
        return result

    backend = _BACKENDS[dispatch_key]
    _C._register_python_kernel(name, backend, kernel)
    return name, backend


def remove(name, backend):
    _C._remove_python_kernel(name, backend)
