"""trainrun.export: a module's forward captured whole, with its weights frozen, and compiled ahead of time.

    ep = trainrun.export.export(model, (x,))      # or trainrun.export(model, (x,)); an ExportedProgram
    ep.module()(x)                                # runs the program (its pointwise runs fused)
    trainrun.aot_compile(ep, "model.aot")         # a folder: model.so (the program and its loops) + weights
    trainrun.aot_load("model.aot")(x)             # or from C++: trainrun::aot::Model m(path); m.run({x})

The forward is recorded at the dispatcher under no_grad (compile/graph_capture.h), so a module written in C++
or Python is seen alike; what cannot be captured (a tensor's values read into Python, hooks, collectives) is
an error naming it, as torch.export's. The parameters and buffers it reads are copied when exported: training
the module afterwards does not change the program. Inputs are tensors (positional, or keywords by name) of
the example's shapes and dtypes; a call with another shape is refused, naming the input.

Dims named in dynamic_shapes (Dim("batch", min=1, max=64), Dim.AUTO, 2 * batch) may take any size in their
range: the forward is recorded at several of their sizes, and each integer of the program that changes with
them is fitted as a polynomial of them and checked at more sizes (compile/dynamic_shapes.h). A forward whose
ops change with such a size is refused, naming the op."""
import collections
import enum
import importlib
import inspect
import json
import os
import sys
import tempfile
import types
import zipfile

from trainrun import _C
from trainrun._compile import GraphBreakError, _flatten, _unflatten

__all__ = ["export", "ExportedProgram", "ExportGraphSignature", "InputKind", "InputSpec", "OutputKind", "OutputSpec",
           "TensorArgument", "save", "load", "Dim", "dims"]

_exporting = 0  # export() calls recording now (trainrun.compiler.is_exporting)


class InputKind(enum.Enum):
    USER_INPUT = enum.auto()
    PARAMETER = enum.auto()
    BUFFER = enum.auto()
    CONSTANT_TENSOR = enum.auto()


class OutputKind(enum.Enum):
    USER_OUTPUT = enum.auto()


TensorArgument = collections.namedtuple("TensorArgument", "name")
InputSpec = collections.namedtuple("InputSpec", "kind arg target persistent", defaults=(None,))
OutputSpec = collections.namedtuple("OutputSpec", "kind arg target")


class ExportGraphSignature:
    """Names of the program's inputs (user_inputs), outputs, and frozen weights (parameters, buffers); input_specs
    and output_specs spell them as torch.export does (the weights first, as p_/b_ arguments naming their
    targets, then the user inputs)."""

    def __init__(self, user_inputs, user_outputs, parameters, buffers):
        self.user_inputs, self.user_outputs = list(user_inputs), list(user_outputs)
        self.parameters, self.buffers = list(parameters), list(buffers)

    @property
    def input_specs(self):
        def arg(prefix, target):
            return TensorArgument(prefix + target.replace(".", "_"))

        return ([InputSpec(InputKind.PARAMETER, arg("p_", t), t) for t in self.parameters] +
                [InputSpec(InputKind.BUFFER, arg("b_", t), t, True) for t in self.buffers] +
                [InputSpec(InputKind.USER_INPUT, TensorArgument(n), None) for n in self.user_inputs])

    @property
    def output_specs(self):
        return [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(n), None) for n in self.user_outputs]

    def __repr__(self):
        return (f"ExportGraphSignature(user_inputs={self.user_inputs}, user_outputs={self.user_outputs}, "
                f"parameters={self.parameters}, buffers={self.buffers})")


class ExportedProgram:
    """A captured forward: run it with module() (or call it), write it with trainrun.aot_compile."""

    def __init__(self, graph, kernels_source, fusion_note, input_names, input_meta, constant_names, state_dict,
                 out_spec, signature, example_inputs, dynamic=None):
        self._graph, self._kernels_source, self._fusion_note = graph, kernels_source, fusion_note
        self._dynamic = dynamic  # a _C._DynamicProgram (its base is graph) when exported with dynamic_shapes
        self._input_names, self._input_meta = input_names, input_meta
        self._constant_names, self._out_spec = constant_names, out_spec
        self.state_dict = state_dict
        self.graph_signature = signature
        self.example_inputs = example_inputs

    def _check(self, tensors):
        if len(tensors) != len(self._input_names):
            raise ValueError(f"ExportedProgram: {len(tensors)} inputs given, the program takes "
                             f"{len(self._input_names)} ({', '.join(self._input_names)})")
        for name, t, (shape, dtype) in zip(self._input_names, tensors, self._input_meta):
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"ExportedProgram: input '{name}' is a {type(t).__name__}, not a tensor")
            if self._dynamic is None and tuple(t.shape) != shape:
                raise ValueError(f"ExportedProgram: input '{name}' has shape {list(t.shape)}; the program was "
                                 f"exported for {list(shape)}")
            if t.dtype != dtype:
                raise ValueError(f"ExportedProgram: input '{name}' is {t.dtype}; the program was exported for {dtype}")

    def __call__(self, *args, **kwargs):
        tensors = list(args) + [kwargs[n] for n in self._input_names[len(args):] if n in kwargs]
        self._check(tensors)
        tensors = [t.contiguous() for t in tensors]
        if self._dynamic is not None:
            try:
                outputs = self._dynamic.run(tensors, self._input_names)
            except ValueError as e:
                raise ValueError(f"ExportedProgram: {e}") from None
        else:
            with _no_grad():
                outputs = self._graph.run(tensors)
        return _unflatten(self._out_spec, iter(outputs))

    def module(self):
        """An nn.Module whose forward runs the program (its weights are the frozen copies in state_dict)."""
        from trainrun import nn
        program = self

        class ExportedModule(nn.Module):
            def forward(self, *args, **kwargs):
                return program(*args, **kwargs)

        return ExportedModule()

    @property
    def graph_module(self):
        """The program as a module (module()'s), with its program text as `code` and `graph`, and
        print_readable() printing it: trainrun's programs are op lists recorded at the dispatcher, not FX graphs."""
        m = self.module()
        text = f"def forward(self, {', '.join(self._input_names)}):\n{self._graph}"
        object.__setattr__(m, "code", text)
        object.__setattr__(m, "graph", text)

        def print_readable(print_output=True, include_stride=False, include_device=False, colored=False):
            if print_output:
                print(text)
            return text

        object.__setattr__(m, "print_readable", print_readable)
        return m

    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        """The program is recorded at the dispatcher, so its nodes are trainrun's ops already (no composite ops to
        break down): returns the program itself."""
        return self

    @property
    def graph(self):
        return str(self._graph)

    @property
    def range_constraints(self):
        """{dim name: ValueRange(lower, upper)} of the dynamic dims (upper None: unbounded); {} when static."""
        if self._dynamic is None:
            return {}
        return {name: ValueRange(lo, None if hi >= _NO_MAX else hi) for name, lo, hi in self._dynamic.dims}

    @property
    def constants(self):
        """Tensor constants that are neither parameters nor buffers (tensors the forward closed over)."""
        named = set(self.graph_signature.parameters) | set(self.graph_signature.buffers)
        return {k: v for k, v in self.state_dict.items() if k not in named}

    def __str__(self):
        shapes = ""
        if self._dynamic is not None:
            shapes = " for " + ", ".join(f"{name}: [{', '.join(dims)}]" for name, dims in
                                         zip(self._input_names, self._shape_names()))
        return (f"ExportedProgram({', '.join(self._input_names)}){shapes}: {self._graph.num_nodes} nodes, "
                f"{len(self.state_dict)} frozen weights; {self._fusion_note}\n{self._graph}")

    def _shape_names(self):
        """Per input, its dims as text: a size, or the dynamic dim's name (with its multiple and offset)."""
        names = [d[0] for d in self._dynamic.dims]
        out = []
        for (shape, _), spec in zip(self._input_meta, self._dynamic.input_dims):
            dims = []
            for size, d in zip(shape, spec):
                if d is None:
                    dims.append(str(size))
                else:
                    index, mul, add = d
                    dims.append(f"{mul}*{names[index]}" if mul != 1 else names[index])
                    if add:
                        dims[-1] += f" + {add}" if add > 0 else f" - {-add}"
            out.append(dims)
        return out


_NO_MAX = 2 ** 63 - 1  # (a dim with no upper bound)


class ValueRange(tuple):
    """A dynamic dim's range: lower and upper (None: unbounded), inclusive."""

    def __new__(cls, lower, upper):
        return super().__new__(cls, (lower, upper))

    lower = property(lambda self: self[0])
    upper = property(lambda self: self[1])

    def __repr__(self):
        return f"VR[{self.lower}, {'int_oo' if self.upper is None else self.upper}]"


class _DimHint:
    """Dim.AUTO, Dim.DYNAMIC (the dim varies; export names it) and Dim.STATIC (it does not)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Dim.{self.name}"


class Dim:
    """torch.export.Dim(name, min=None, max=None): a dimension that varies, for export's dynamic_shapes. Its sizes
    are min..max inclusive (min defaults to 0, max to unbounded). One Dim used at several inputs' dims makes them
    equal; `2 * dim`, `dim + 1` are dims derived from it. Dim.AUTO and Dim.DYNAMIC make a dim vary under a name
    of export's own, Dim.STATIC keeps it at the example's size."""

    AUTO = _DimHint("AUTO")
    DYNAMIC = _DimHint("DYNAMIC")
    STATIC = _DimHint("STATIC")

    def __init__(self, name, *, min=None, max=None):  # noqa: A002
        if not isinstance(name, str) or not name:
            raise ValueError(f"Dim: the name must be a non-empty string, got {name!r}")
        for what, v in (("min", min), ("max", max)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ValueError(f"Dim {name!r}: {what} must be a non-negative int, got {v!r}")
        if min is not None and max is not None and min > max:
            raise ValueError(f"Dim {name!r}: min ({min}) is greater than max ({max})")
        self.__name__ = name
        self.min = 0 if min is None else min
        self.max = _NO_MAX if max is None else max

    def __repr__(self):
        return f"Dim({self.__name__!r}, min={self.min}, max={'int_oo' if self.max == _NO_MAX else self.max})"

    def _affine(self, mul, add):
        return _DerivedDim(self, mul, add)

    def __mul__(self, k):
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            return NotImplemented
        return self._affine(k, 0)

    __rmul__ = __mul__

    def __add__(self, k):
        if not isinstance(k, int) or isinstance(k, bool):
            return NotImplemented
        return self._affine(1, k)

    __radd__ = __add__

    def __sub__(self, k):
        if not isinstance(k, int) or isinstance(k, bool):
            return NotImplemented
        return self._affine(1, -k)


class _DerivedDim:
    """mul * root + add: a dim whose size follows another's (2 * batch, seq + 1)."""

    def __init__(self, root, mul, add):
        self.root, self.mul, self.add = root, mul, add
        self.__name__ = f"{mul}*{root.__name__}" if mul != 1 else root.__name__
        if add:
            self.__name__ += f" + {add}" if add > 0 else f" - {-add}"

    def __mul__(self, k):
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            return NotImplemented
        return _DerivedDim(self.root, self.mul * k, self.add * k)

    __rmul__ = __mul__

    def __add__(self, k):
        if not isinstance(k, int) or isinstance(k, bool):
            return NotImplemented
        return _DerivedDim(self.root, self.mul, self.add + k)

    __radd__ = __add__

    def __sub__(self, k):
        return self.__add__(-k) if isinstance(k, int) and not isinstance(k, bool) else NotImplemented

    def __repr__(self):
        return self.__name__


def dims(*names, min=None, max=None):  # noqa: A002
    """torch.export.dims: one Dim per name, with the same range."""
    return tuple(Dim(n, min=min, max=max) for n in names)


def _no_grad():
    from trainrun._autograd import no_grad
    return no_grad()


def _input_names(mod, args, kwargs):
    forward = mod.forward if hasattr(mod, "forward") else mod
    try:
        params = [p for p in inspect.signature(forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [params[i].name if i < len(params) else f"arg{i}" for i in range(len(args))]
    return names + list(kwargs)


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=True, preserve_module_call_signature=()):
    """torch.export.export's signature: mod's forward on `args` (a tuple of tensors) and `kwargs`, captured whole.
    dynamic_shapes: per input (a dict by the forward's argument names, or a tuple in order), None (static), a dict
    {dim: Dim} or a sequence with a Dim (or None) per dim; those dims may then take any size in their range."""
    if not isinstance(args, tuple):
        raise TypeError(f"export: args must be a tuple of example inputs, got {type(args).__name__}")
    kwargs = dict(kwargs or {})
    names = _input_names(mod, args, kwargs)
    given = list(args) + list(kwargs.values())
    for name, value in zip(names, given):
        if not isinstance(value, _C.Tensor):
            raise TypeError(f"export: input '{name}' is a {type(value).__name__}; only tensor inputs are supported "
                            "(close over other values in the module)")
    tensors = [t.contiguous() for t in given]
    dims, input_dims = _dynamic_dims(dynamic_shapes, names, tensors)
    graph, out_leaves, out_spec = _record(mod, tensors, len(args), list(kwargs))
    for i, o in enumerate(out_leaves):
        if any(o is t for t in tensors):
            raise ValueError(f"export: output {i} is the input itself; return a copy (x.clone())")

    # Name the captured tensors by the module's parameters and buffers, then freeze them (copies).
    named = {}
    params, buffers = [], []
    if hasattr(mod, "named_parameters"):
        for kind, items in (("p", mod.named_parameters()), ("b", mod.named_buffers())):
            for n, t in items:
                named.setdefault(_identity(t), (n, kind))
    constant_names, frozen = [], []
    for i, t in enumerate(_C._graph_constants(graph)):
        name, kind = named.get(_identity(t), (f"_tensor_constant{i}", "c"))
        (params if kind == "p" else buffers if kind == "b" else []).append(name)
        constant_names.append(name)
        frozen.append(t.detach().clone())
    graph = _C._graph_with_constants(graph, frozen)
    graph, fusion_note, source = _C._fuse_graph(graph)
    dynamic = None
    if dims:
        dynamic = _generalize(mod, tensors, len(args), list(kwargs), dims, input_dims, graph, source)
    signature = ExportGraphSignature(names, [f"output{i}" for i in range(len(out_leaves))], params, buffers)
    meta = [(tuple(t.shape), t.dtype) for t in tensors]
    return ExportedProgram(graph, source, fusion_note, names, meta, constant_names, dict(zip(constant_names, frozen)),
                           out_spec, signature, (args, kwargs), dynamic)


def _record(mod, tensors, num_args, kwarg_names):
    """(graph, output tensors, output spec): mod's forward on these inputs, recorded under no_grad."""
    call_args, call_kwargs = tensors[:num_args], dict(zip(kwarg_names, tensors[num_args:]))
    graph = _C._CapturedGraph()
    capture = _C._GraphCapture(graph, tensors)
    global _exporting
    _exporting += 1
    try:
        with _no_grad(), capture:
            result = mod(*call_args, **call_kwargs)
            out_leaves = []
            out_spec = _flatten(result, out_leaves)
            capture.finish(out_leaves)
    finally:
        _exporting -= 1
    if capture.broken:
        raise GraphBreakError(f"export: {type(mod).__name__}.forward could not be captured whole: "
                              f"{capture.break_reason}")
    return graph, out_leaves, out_spec


# ---- dynamic shapes ------------------------------------------------------------------------------------------------
def _dynamic_dims(dynamic_shapes, names, tensors):
    """([Dim, ...] the dims that vary, in order of first use; per input, per dim, None or (index into them, mul,
    add)) from export's dynamic_shapes, checked against the example inputs. ([], None): nothing varies."""
    if dynamic_shapes is None:
        return [], None
    if isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in names]
        if unknown:
            raise ValueError(f"export: dynamic_shapes names {unknown}, which are not inputs; the inputs are {names}")
        per_input = [dynamic_shapes.get(n) for n in names]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(names):
            raise ValueError(f"export: dynamic_shapes has {len(dynamic_shapes)} entries for {len(names)} inputs "
                             f"({', '.join(names)})")
        per_input = list(dynamic_shapes)
    else:
        raise TypeError(f"export: dynamic_shapes must be a dict by input name or a tuple, got "
                        f"{type(dynamic_shapes).__name__}")
    roots, values, where = [], [], []  # the varying Dims, their example values, where each was first met
    input_dims = []
    auto = 0
    for name, t, spec in zip(names, tensors, per_input):
        ndim = t.dim()
        if spec is None:
            by_dim = {}
        elif isinstance(spec, dict):
            by_dim = {}
            for d, dim in spec.items():
                if not isinstance(d, int) or not -ndim <= d < ndim:
                    raise ValueError(f"export: dynamic_shapes['{name}'] names dim {d!r}; the input has {ndim} dims")
                by_dim[d % ndim] = dim
        elif isinstance(spec, (tuple, list)):
            if len(spec) != ndim:
                raise ValueError(f"export: dynamic_shapes['{name}'] has {len(spec)} entries; the input has {ndim} dims")
            by_dim = dict(enumerate(spec))
        else:
            raise TypeError(f"export: dynamic_shapes['{name}'] must be None, a dict {{dim: Dim}} or a tuple of Dims, "
                            f"got {type(spec).__name__}")
        entries = []
        for d in range(ndim):
            dim, size = by_dim.get(d), t.shape[d]
            if dim is None or dim is Dim.STATIC:
                entries.append(None)
                continue
            if dim is Dim.AUTO or dim is Dim.DYNAMIC:
                dim = Dim(f"s{auto}")
                auto += 1
            if isinstance(dim, Dim):
                root, mul, add = dim, 1, 0
            elif isinstance(dim, _DerivedDim):
                root, mul, add = dim.root, dim.mul, dim.add
            else:
                raise TypeError(f"export: dynamic_shapes['{name}'] dim {d} is {dim!r}; expected a Dim, Dim.AUTO, "
                                "Dim.STATIC or None")
            at = f"{name}.shape[{d}]"
            if size < 2:
                raise ValueError(f"export: {at} is {size} in the example and {dim.__name__} is dynamic; a size of 0 or "
                                 "1 broadcasts into another program, so export from an example of 2 or more there "
                                 "(as torch.export requires); the program then runs at 0 and 1 too")
            if (size - add) % mul:
                raise ValueError(f"export: {at} is {size}, which is not {dim.__name__} for any {root.__name__}")
            value = (size - add) // mul
            found = next((i for i, r in enumerate(roots) if r.__name__ == root.__name__), None)
            if found is None:
                if not root.min <= value <= root.max:
                    raise ValueError(f"export: {at} is {size}, so {root.__name__} = {value}, outside {root!r}")
                roots.append(root)
                values.append(value)
                where.append(at)
                found = len(roots) - 1
            else:
                other = roots[found]
                if (other.min, other.max) != (root.min, root.max):
                    raise ValueError(f"export: two Dims are named {root.__name__!r} with different ranges: {other!r} "
                                     f"and {root!r}")
                if values[found] != value:
                    raise ValueError(f"export: {at} is {size}, so {root.__name__} = {value}; but {root.__name__} = "
                                     f"{values[found]} at {where[found]}: the example inputs disagree")
            entries.append((found, mul, add))
        input_dims.append(entries)
    if not roots:
        return [], None
    return [(r, v) for r, v in zip(roots, values)], input_dims


def _monomials(k, degree):
    """Exponents of the monomials of total degree <= degree in k variables, in compile/dynamic_shapes.cc's order."""
    out = []

    def fill(i, left, e):
        if i == k:
            out.append(tuple(e))
            return
        for d in range(left + 1):
            fill(i + 1, left - d, e + [d])

    fill(0, degree, [])
    return out


def _resized(t, sizes):
    """t with the given sizes, its values taken cyclically along each dim that changes (so indices stay valid)."""
    for d, n in enumerate(sizes):
        if n != t.shape[d]:
            t = t.index_select(d, _C.arange(n) % t.shape[d])
    return t.contiguous()


def _generalize(mod, tensors, num_args, kwarg_names, dims, input_dims, graph, source):
    """The program for all sizes of the dims: recordings at a lattice of their sizes fitted by
    compile/dynamic_shapes.h, and checked at more: one past the lattice, the example's, and twice the example's
    (a forward that branches on a size in that span is caught). Sizes recorded start at 2 (a size of 1 would
    broadcast) and stay in each Dim's range."""
    roots = [r for r, _ in dims]
    example = tuple(v for _, v in dims)
    lows = []
    for i, root in enumerate(roots):
        low = max(root.min, 2)
        for entries in input_dims:  # (a derived dim's sizes too start at 2)
            for e in entries:
                if e is not None and e[0] == i and e[1] * low + e[2] < 2:
                    low = max(low, -(-(2 - e[2]) // e[1]))
        lows.append(low)
    span = min(root.max - low for root, low in zip(roots, lows))
    degree = min(3, span - 1)
    if degree < 1:
        narrow = [r for r, low in zip(roots, lows) if r.max - low < 2][0]
        raise ValueError(f"export: {narrow!r} allows too few sizes to record the program at (it needs 3 from 2 up); "
                         "make that dim static")
    origin = tuple(min(low, root.max - degree - 1) for low, root in zip(lows, roots))
    points = [tuple(o + e for o, e in zip(origin, exps)) for exps in _monomials(len(roots), degree)]
    checks = [tuple(o + (degree + 1 if j == i else 0) for j, o in enumerate(origin)) for i in range(len(roots))]
    if len(roots) > 1:
        checks.append(tuple(o + 2 for o in origin))
    checks.append(example)
    checks.append(tuple(min(r.max, max(2 * v, o + degree + 2)) for r, v, o in zip(roots, example, origin)))
    points += [c for c in checks if c not in points and all(c[i] <= roots[i].max for i in range(len(roots)))]
    if len(points) == len(_monomials(len(roots), degree)):
        raise ValueError("export: the dynamic dims' ranges leave no size to check the program at; make them static")
    buffers = [(b, b.clone()) for b in mod.buffers()] if hasattr(mod, "buffers") else []
    graphs = []
    try:
        for point in points:
            if point == example:
                graphs.append(graph)
                continue
            inputs = []
            for t, entries in zip(tensors, input_dims):
                sizes = [t.shape[d] if e is None else e[1] * point[e[0]] + e[2] for d, e in enumerate(entries)]
                inputs.append(_resized(t, sizes))
            try:
                g, _, _ = _record(mod, inputs, num_args, kwarg_names)
            except GraphBreakError:
                raise
            except Exception as e:
                at = ", ".join(f"{r.__name__}={v}" for r, v in zip(roots, point))
                message = (f"export with dynamic shapes: the forward fails at {at}, a size in the dims' ranges: {e}. "
                           "Give the Dim a range the model takes (Dim(name, min=..., max=...)), or make the dim static")
                try:
                    error = type(e)(message)
                except Exception:  # (an exception type with other arguments)
                    error = RuntimeError(message)
                raise error from e
            g, _, s = _C._fuse_graph(g)
            if s != source:
                at = ", ".join(f"{r.__name__}={v}" for r, v in zip(roots, point))
                raise ValueError(f"export with dynamic shapes: the program's fused loops at {at} differ from those at "
                                 "the example's sizes; its ops depend on the dynamic dims' values")
            graphs.append(g)
    finally:
        with _no_grad():  # (recording ran the forward: a BatchNorm in training mode updated its statistics)
            for b, saved in buffers:
                b.copy_(saved)
    specs = [(r.__name__, r.min, r.max) for r in roots]
    return _C._DynamicProgram.generalize(specs, input_dims, graphs, [list(p) for p in points], degree,
                                         points.index(example))


def _identity(t):
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)


def aot_compile(exported, path):
    """Writes the program to the folder `path`: model.so (its fused loops, compiled by the system compiler, and
    the program) and weights.safetensors (its frozen weights by name). Returns path. Run it with aot_load(path)
    or, from C++, trainrun::aot::Model (compile/aot_model.h)."""
    if not isinstance(exported, ExportedProgram):
        raise TypeError(f"aot_compile: expected an ExportedProgram (trainrun.export.export), got "
                        f"{type(exported).__name__}")
    path = str(path)
    _C._write_aot_package(path, exported._graph, exported._kernels_source, exported._input_names,
                          exported._constant_names, exported._dynamic)
    return path


class AOTModel:
    """A package aot_compile wrote, loaded (no Python is involved in running it): call it with the inputs. Its
    outputs come back as the module returned them when the package knows their structure (an archive does),
    otherwise as one tensor or a list."""

    def __init__(self, path, out_spec=None, keep_alive=None):
        self._model = _C._AotModel(str(path))
        self.input_names = self._model.input_names
        self._out_spec = out_spec
        self._keep_alive = keep_alive  # the folder an archive was unpacked into, removed with the model

    def __call__(self, *args, **kwargs):
        unknown = [n for n in kwargs if n not in self.input_names]
        if unknown:
            raise TypeError(f"AOTModel: unknown keyword input(s) {unknown}; the inputs are {self.input_names}")
        tensors = list(args) + [kwargs[n] for n in self.input_names[len(args):] if n in kwargs]
        outputs = self._model.run(tensors)
        if self._out_spec is not None:
            return _unflatten(self._out_spec, iter(outputs))
        return outputs[0] if len(outputs) == 1 else outputs


def aot_load(path):
    """The package at `path` (aot_compile's folder, or an archive that save() or
    trainrun._inductor.aoti_compile_and_package wrote), ready to call."""
    if _is_archive(path):
        folder, meta = _unpack(path)
        return AOTModel(folder.name, _spec_from_json(meta["out_spec"]), folder)
    return AOTModel(path)


# ---- archives: one file holding the package and what Python needs to rebuild the ExportedProgram -------------
# A zip (PyTorch's .pt2 is one too) of the package's model.so and weights.safetensors, kernels.cpp (the loops'
# source, for aot_compile again), example_inputs.safetensors, and program.json: the inputs' names, shapes and
# dtypes, the weights' names, the signature, and the outputs' structure. JSON, not pickle: loading a file runs no
# code from it but the package's own compiled program.
_ARCHIVE_FORMAT = "trainrun.export/1"


def _spec_to_json(spec):
    kind = spec[0]
    if kind == "T":
        return {"kind": "T"}
    if kind == "N":
        return {"kind": "N", "type": f"{spec[1].__module__}:{spec[1].__qualname__}",
                "items": [_spec_to_json(s) for s in spec[2]]}
    if kind in ("tuple", "list"):
        return {"kind": kind, "items": [_spec_to_json(s) for s in spec[1]]}
    if kind == "dict":
        if not all(isinstance(k, str) for k in spec[1]):
            raise ValueError(f"save: the program returns a dict with keys {list(spec[1])}; only string keys can "
                             "be saved")
        return {"kind": "dict", "keys": list(spec[1]), "items": [_spec_to_json(s) for s in spec[2]]}
    value = spec[1]
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise ValueError(f"save: the program returns a {type(value).__name__} next to its tensors; only None, "
                         "numbers and strings can be saved")
    return {"kind": "C", "value": value}


def _spec_from_json(j):
    kind = j["kind"]
    if kind == "T":
        return ("T",)
    if kind == "N":
        module, qualname = j["type"].split(":")
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        return ("N", cls, tuple(_spec_from_json(s) for s in j["items"]))
    if kind in ("tuple", "list"):
        return (kind, tuple(_spec_from_json(s) for s in j["items"]))
    if kind == "dict":
        return ("dict", tuple(j["keys"]), tuple(_spec_from_json(s) for s in j["items"]))
    return ("C", j["value"])


def _is_archive(f):
    if hasattr(f, "read"):
        return True
    return os.path.isfile(str(f)) and zipfile.is_zipfile(str(f))


def _write_archive(ep, f, extra_files=None):
    import trainrun
    with tempfile.TemporaryDirectory() as d:
        aot_compile(ep, d)
        args, kwargs = ep.example_inputs
        examples = {f"arg{i}": t for i, t in enumerate(args)}
        examples.update({f"kwarg.{k}": t for k, t in kwargs.items()})
        trainrun.save({k: v.contiguous() for k, v in examples.items()}, os.path.join(d, "example_inputs.safetensors"))
        sig = ep.graph_signature
        meta = {"format": _ARCHIVE_FORMAT, "input_names": ep._input_names,
                "input_meta": [[list(shape), str(dtype).replace("trainrun.", "")] for shape, dtype in ep._input_meta],
                "constant_names": ep._constant_names, "out_spec": _spec_to_json(ep._out_spec),
                "fusion_note": ep._fusion_note, "num_args": len(args), "kwarg_names": list(kwargs),
                "signature": {"user_inputs": sig.user_inputs, "user_outputs": sig.user_outputs,
                              "parameters": sig.parameters, "buffers": sig.buffers}}
        with open(os.path.join(d, "program.json"), "w") as out:
            json.dump(meta, out)
        with open(os.path.join(d, "kernels.cpp"), "w") as out:
            out.write(ep._kernels_source)
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
            for name in sorted(os.listdir(d)):
                z.write(os.path.join(d, name), name)
            for name, content in (extra_files or {}).items():
                z.writestr(f"extra/{name}", content)


def _unpack(f):
    """(a TemporaryDirectory holding the archive's files, its program.json). ValueError naming what is wrong."""
    if hasattr(f, "seek"):
        f.seek(0)
    folder = tempfile.TemporaryDirectory(prefix="trainrun-export-")
    try:
        with zipfile.ZipFile(f) as z:
            names = {n for n in z.namelist() if not n.startswith("extra/")}  # (save's extra_files stay in it)
            missing = {"model.so", "weights.safetensors", "program.json", "kernels.cpp"} - names
            if missing:
                raise ValueError(f"load: {f!r} is not a trainrun export archive: it lacks {sorted(missing)}")
            for name in names:  # flat: refuse paths that would land outside the folder
                if os.path.basename(name) != name:
                    raise ValueError(f"load: {f!r} holds {name!r}, a path; an archive holds plain file names")
            z.extractall(folder.name, members=sorted(names))
    except zipfile.BadZipFile as e:
        folder.cleanup()
        raise ValueError(f"load: {f!r} is not a zip archive ({e})") from None
    except BaseException:
        folder.cleanup()
        raise
    with open(os.path.join(folder.name, "program.json")) as meta_file:
        meta = json.load(meta_file)
    if meta.get("format") != _ARCHIVE_FORMAT:
        folder.cleanup()
        raise ValueError(f"load: {f!r} has format {meta.get('format')!r}; this build reads {_ARCHIVE_FORMAT!r}")
    return folder, meta


def save(ep, f, *, extra_files=None, opset_version=None, pickle_protocol=2):
    """torch.export.save: writes the ExportedProgram to `f` (a path, conventionally *.pt2, or a binary file) as
    one archive: the program compiled (aot_compile's package), its frozen weights and example inputs. load() reads
    it back; aot_load runs it. extra_files: {name: str} stored next to it (load fills the same dict)."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"save: expected an ExportedProgram (trainrun.export.export), got {type(ep).__name__}")
    _write_archive(ep, f, extra_files)


def load(f, *, extra_files=None, expected_opset_version=None):
    """torch.export.load: the ExportedProgram save() wrote to `f` (a path or a binary file). Its program is the
    archive's compiled package (nothing is compiled again); calls, module(), state_dict and aot_compile work as
    on the program export() made. extra_files: a dict whose keys are filled with the contents saved under them."""
    import trainrun
    if not _is_archive(f):
        raise ValueError(f"load: {f!r} is not a file save() wrote")
    if extra_files:
        if hasattr(f, "seek"):
            f.seek(0)
        with zipfile.ZipFile(f) as z:
            for name in extra_files:
                if f"extra/{name}" in z.namelist():
                    extra_files[name] = z.read(f"extra/{name}").decode()
        if hasattr(f, "seek"):
            f.seek(0)
    folder, meta = _unpack(f)
    model = _C._AotModel(folder.name)
    graph = model.graph
    with open(os.path.join(folder.name, "kernels.cpp")) as src:
        kernels_source = src.read()
    examples = trainrun.load(os.path.join(folder.name, "example_inputs.safetensors"))
    args = tuple(examples[f"arg{i}"] for i in range(meta["num_args"]))
    kwargs = {k: examples[f"kwarg.{k}"] for k in meta["kwarg_names"]}
    constants = dict(zip(meta["constant_names"], _C._graph_constants(graph)))
    s = meta["signature"]
    signature = ExportGraphSignature(s["user_inputs"], s["user_outputs"], s["parameters"], s["buffers"])
    input_meta = [(tuple(shape), getattr(trainrun, dtype)) for shape, dtype in meta["input_meta"]]
    ep = ExportedProgram(graph, kernels_source, meta["fusion_note"], meta["input_names"], input_meta,
                         meta["constant_names"], constants, _spec_from_json(meta["out_spec"]), signature,
                         (args, kwargs), model.dynamic)
    ep._keep_alive = (folder, model)  # the unpacked model.so backs the program's loops
    return ep


class _CallableModule(types.ModuleType):
    """trainrun.export(module, example_inputs) works as trainrun.export.export(...)."""

    def __call__(self, mod, args, kwargs=None, **options):
        return export(mod, args, kwargs, **options)


sys.modules[__name__].__class__ = _CallableModule
