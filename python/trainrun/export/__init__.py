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
import inspect
import sys
import types

from trainrun import _C, _ops
from trainrun._compile import _unflatten
from trainrun.export import _structured
from trainrun.export._recording import _no_grad, _record
from trainrun.export._structured import register_dataclass  # noqa: F401
from trainrun.utils import _pytree
from trainrun.export._specialized import (_SpecializedCall, _check_specialized, _specialized_inputs,
                                          _without_specialized)
from trainrun.export.dynamic_shapes import _NO_MAX, Dim, ValueRange, _dynamic_dims, _generalize, dims  # noqa: F401

__all__ = ["export", "export_for_training", "default_decompositions", "ExportedProgram", "ExportGraphSignature",
           "InputKind", "InputSpec", "OutputKind", "OutputSpec", "TensorArgument", "save", "load", "Dim", "dims"]


class InputMismatchError(RuntimeError, ValueError):
    """An exported program or AOT package refused an input (count, shape, dtype, device). PyTorch raises
    RuntimeError there; trainrun's bad-input errors are ValueError; this is both, so either `except` works."""


class InputKind(enum.Enum):
    USER_INPUT = enum.auto()
    PARAMETER = enum.auto()
    BUFFER = enum.auto()
    CONSTANT_TENSOR = enum.auto()


class OutputKind(enum.Enum):
    USER_OUTPUT = enum.auto()
    LOSS_OUTPUT = enum.auto()
    BUFFER_MUTATION = enum.auto()
    GRADIENT_TO_PARAMETER = enum.auto()
    GRADIENT_TO_USER_INPUT = enum.auto()
    USER_INPUT_MUTATION = enum.auto()


TensorArgument = collections.namedtuple("TensorArgument", "name")
InputSpec = collections.namedtuple("InputSpec", "kind arg target persistent", defaults=(None,))
OutputSpec = collections.namedtuple("OutputSpec", "kind arg target")


class ExportGraphSignature:
    """Names of the program's inputs (user_inputs), outputs, and frozen weights (parameters, buffers); input_specs
    and output_specs spell them as torch.export does (the weights first, as p_/b_ arguments naming their
    targets, then the user inputs)."""

    def __init__(self, user_inputs, user_outputs, parameters, buffers, mutated_buffers=()):
        self.user_inputs, self.user_outputs = list(user_inputs), list(user_outputs)
        self.parameters, self.buffers = list(parameters), list(buffers)
        self.mutated_buffers = list(mutated_buffers)  # written by the program in place (copy_, add_)

    @property
    def buffers_to_mutate(self):
        """{output name: buffer}: torch.export returns a buffer's new value as an output; trainrun's program
        writes the buffer in place, so each is named here by its buffer."""
        return {f"mutated_{b.replace('.', '_')}": b for b in self.mutated_buffers}

    @property
    def inputs_to_parameters(self):
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.PARAMETER}

    @property
    def inputs_to_buffers(self):
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.BUFFER}

    @property
    def input_specs(self):
        def arg(prefix, target):
            return TensorArgument(prefix + target.replace(".", "_"))

        return ([InputSpec(InputKind.PARAMETER, arg("p_", t), t) for t in self.parameters] +
                [InputSpec(InputKind.BUFFER, arg("b_", t), t, True) for t in self.buffers] +
                [InputSpec(InputKind.USER_INPUT, TensorArgument(n), None) for n in self.user_inputs])

    @property
    def output_specs(self):
        mutations = self.buffers_to_mutate.items()
        return ([OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(n), b) for n, b in mutations] +
                [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(n), None) for n in self.user_outputs])

    def __repr__(self):
        return (f"ExportGraphSignature(user_inputs={self.user_inputs}, user_outputs={self.user_outputs}, "
                f"parameters={self.parameters}, buffers={self.buffers})")


class ExportedProgram:
    """A captured forward: run it with module() (or call it), write it with trainrun.aot_compile."""

    def __init__(self, graph, kernels_source, fusion_note, input_names, input_meta, constant_names, state_dict,
                 out_spec, signature, example_inputs, dynamic=None, recorded=None):
        self._graph, self._kernels_source, self._fusion_note = graph, kernels_source, fusion_note
        self._recorded = recorded  # the program before fusion (None when loaded from an archive: graph is it)
        self._fx_graph = None
        self._dynamic = dynamic  # a _C._DynamicProgram (its base is graph) when exported with dynamic_shapes
        self._input_names, self._input_meta = input_names, input_meta
        self._constant_names, self._out_spec = constant_names, out_spec
        self.state_dict = state_dict
        self.graph_signature = signature
        self.example_inputs = example_inputs
        # Non-tensor inputs, fixed at export: (position or None for a keyword, name, value); see _specialized.py.
        self._specialized = []
        self._in_spec = None  # the inputs' structure when they hold containers (_structured.py)
        self._example_tensors = example_inputs  # (the program's own inputs: the leaves, less specialized values)

    def _check(self, tensors):
        if len(tensors) != len(self._input_names):
            raise InputMismatchError(f"ExportedProgram: {len(tensors)} inputs given, the program takes "
                             f"{len(self._input_names)} ({', '.join(self._input_names)})")
        for name, t, (shape, dtype) in zip(self._input_names, tensors, self._input_meta):
            if not _C._is_cpp_tensor(t):
                raise TypeError(f"ExportedProgram: input '{name}' is a {type(t).__name__}, not a tensor")
            if self._dynamic is None and tuple(t.shape) != shape:
                raise InputMismatchError(f"ExportedProgram: input '{name}' has shape {list(t.shape)}; the program was "
                                 f"exported for {list(shape)}")
            if t.dtype != dtype:
                raise InputMismatchError(f"ExportedProgram: input '{name}' is {t.dtype}; the program was exported for {dtype}")

    def __call__(self, *args, **kwargs):
        if self._in_spec is not None:  # (exported with containers: the call's leaves, by the exported structure)
            args, kwargs = tuple(_structured.flatten_call(self._in_spec, args, kwargs)), {}
        if self._specialized:
            args, kwargs = _check_specialized(self._specialized, args, kwargs)
        tensors = list(args) + [kwargs[n] for n in self._input_names[len(args):] if n in kwargs]
        self._check(tensors)
        tensors = [t.contiguous() for t in tensors]
        if self._dynamic is not None:
            try:
                outputs = self._dynamic.run(tensors, self._input_names)
            except ValueError as e:
                raise InputMismatchError(f"ExportedProgram: {e}") from None
        else:
            with _no_grad():
                outputs = self._graph.run(tensors)
        return _unflatten(self._out_spec, iter(outputs))

    def module(self):
        """The program as a trainrun.fx GraphModule (an nn.Module whose forward runs it, as torch's): the weights
        by name, `graph` (the fx Graph), `code` (its Python, as torch.fx writes it) and print_readable()."""
        from trainrun import nn
        from trainrun.fx import GraphModule

        m = GraphModule(None, self.graph, run=self)
        # (after recompile() the graph runs node by node: its output tuple takes the program's output structure)
        object.__setattr__(m, "_outputs", lambda outputs: _unflatten(self._out_spec, iter(outputs)))
        # The weights under their names, as parameters (not requiring grad: the program does not train) and
        # buffers. They are the program's own tensors: load_state_dict into this module changes what it computes.
        sig = self.graph_signature
        for name, t in self.state_dict.items():
            *path, leaf = name.split(".")
            owner = m
            for part in path:
                children = dict(owner.named_children())
                if part not in children:
                    owner.add_module(part, nn.Module())
                owner = getattr(owner, part)
            if name in sig.parameters:
                owner.register_parameter(leaf, nn.Parameter(t, requires_grad=False))
            elif name in sig.buffers:
                owner.register_buffer(leaf, t)
            else:
                object.__setattr__(owner, leaf, t)
        return m

    def named_parameters(self):
        """(name, tensor) of the program's frozen parameters, in the module's order."""
        for name in self.graph_signature.parameters:
            yield name, self.state_dict[name]

    def parameters(self):
        for _, t in self.named_parameters():
            yield t

    def named_buffers(self):
        """(name, tensor) of the program's frozen buffers, in the module's order."""
        for name in self.graph_signature.buffers:
            yield name, self.state_dict[name]

    def buffers(self):
        for _, t in self.named_buffers():
            yield t

    @property
    def graph_module(self):
        """module(): the program as a module with its graph and code."""
        return self.module()

    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        """The program is recorded at the dispatcher, so its nodes are trainrun's ops already (no composite ops to
        break down): returns the program itself."""
        return self

    @property
    def graph(self):
        """The program as a trainrun.fx Graph (torch.export's layout: placeholders, aten call_function nodes, an
        output node); the ops as recorded, before fusion."""
        if self._fx_graph is None:
            from trainrun.export._graph import program_graph
            sig = self.graph_signature
            kinds = ["p" if n in sig.parameters else "b" if n in sig.buffers else "c" for n in self._constant_names]
            table = (self._recorded or self._graph)._table()
            order = sig.parameters + sig.buffers  # (placeholders in the signature's order; constants after)
            unread = [(n, "p" if n in sig.parameters else "b", t) for n, t in self.state_dict.items()
                      if n not in self._constant_names]
            self._fx_graph = program_graph(table, list(zip(self._constant_names, kinds)), self._input_names, order,
                                           unread)
        return self._fx_graph

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
        code = self.graph.python_code_text(annotate=True).replace("\n", "\n        ").rstrip()
        return (f"ExportedProgram:\n    class GraphModule(torch.nn.Module):\n        {code}\n\n"
                f"Graph signature: {self.graph_signature}\nRange constraints: {self.range_constraints}\n\n"
                f"As run ({', '.join(self._input_names)}){shapes}: {self._graph.num_nodes} nodes, "
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


def _input_names(mod, args, kwargs):
    forward = mod.forward if hasattr(mod, "forward") else mod
    try:
        params = [p for p in inspect.signature(forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if not params and len(args) == 1 and isinstance(mod, _C.nn.Module):
        return ["input"] + list(kwargs)  # (a C++ layer's forward(*args): PyTorch's layers name their input so)
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
    call, in_spec, example_inputs = mod, None, (args, kwargs)
    if _structured.is_structured(args, kwargs):  # containers of tensors: the program takes their leaves
        dynamic_shapes = _structured.flat_dynamic_shapes(dynamic_shapes, names, args, kwargs)
        leaf_names = _structured.leaf_names(names, args, kwargs)
        leaves, in_spec = _pytree.tree_flatten((args, kwargs))
        call = _structured.StructuredCall(mod, in_spec)
        args, kwargs, names = tuple(leaves), {}, leaf_names
    specialized = _specialized_inputs(names, list(args) + list(kwargs.values()), len(args))
    if specialized:  # the program takes the tensors; `call` puts the other values back into each call of mod
        dynamic_shapes = _without_specialized(dynamic_shapes, names, specialized)
        call = _SpecializedCall(call, args, kwargs, specialized)
        args = tuple(a for a in args if _C._is_cpp_tensor(a))
        kwargs = {k: v for k, v in kwargs.items() if _C._is_cpp_tensor(v)}
        names = [n for n in names if n not in {name for _, name, _ in specialized}]
    tensors = [t.contiguous() for t in list(args) + list(kwargs.values())]
    dims, input_dims = _dynamic_dims(dynamic_shapes, names, tensors)
    # Recording runs the forward: what it writes to the module's buffers (a step counter, BatchNorm's statistics)
    # is put back, so that export leaves the module as it was and the program starts from the buffers' values,
    # as torch.export (which runs the forward on fake tensors).
    saved = [(b, b.detach().clone()) for b in mod.buffers()] if hasattr(mod, "buffers") else []
    try:
        graph, out_leaves, out_spec = _record(call, tensors, len(args), list(kwargs))
    finally:
        with _no_grad():
            for b, value in saved:
                b.copy_(value)
    for i, o in enumerate(out_leaves):
        if any(o is t for t in tensors):
            raise ValueError(f"export: output {i} is the input itself; return a copy (x.clone())")

    # Name the captured tensors by the module's parameters and buffers, then freeze them (copies).
    named, weights = {}, {}
    params, buffers = [], []
    if hasattr(mod, "named_parameters"):
        for kind, items in (("p", mod._named_local_parameters()), ("b", mod.named_buffers())):
            for n, t in items:
                named.setdefault(_identity(t), (n, kind))
                weights.setdefault(n, t)
    constant_names, frozen = [], []
    for i, t in enumerate(_C._graph_constants(graph)):
        name, kind = named.get(_identity(t), (f"_tensor_constant{i}", "c"))
        (params if kind == "p" else buffers if kind == "b" else []).append(name)
        constant_names.append(name)
        frozen.append(t.detach().clone())
    # The weights the forward does not read are the program's too: its state_dict is the module's (persistent
    # buffers: a non-persistent one the forward does not read is left out), as torch.export's.
    state_dict = dict(zip(constant_names, frozen))
    from trainrun.nn import _non_persistent_keys
    non_persistent = _non_persistent_keys(mod) if hasattr(mod, "named_parameters") else set()
    for n, kind in named.values():
        if n not in state_dict and n not in non_persistent:
            (params if kind == "p" else buffers).append(n)
            state_dict[n] = weights[n].detach().clone()
    # In the module's order (named_parameters, named_buffers), as torch.export lists them, not the order of use.
    order = {n: k for k, (n, _) in enumerate(named.values())}
    params.sort(key=order.__getitem__)
    buffers.sort(key=order.__getitem__)
    state_dict = {n: state_dict[n] for n in params + buffers + [c for c in constant_names if c not in order]}
    graph = recorded = _C._graph_with_constants(graph, frozen)
    graph, fusion_note, source = _C._fuse_graph(graph)
    dynamic = None
    if dims:
        try:
            dynamic = _generalize(call, tensors, len(args), list(kwargs), dims, input_dims, graph, source)
        except (ValueError, RuntimeError, TypeError, IndexError):
            # Dim.AUTO and Dim.DYNAMIC dims that the forward needs equal (x + y) are one dim, as torch.export
            # infers: those of equal example size become one, and the program is recorded again.
            merged, merged_input_dims = _dynamic_dims(dynamic_shapes, names, tensors, unify_auto=True)
            if len(merged) == len(dims):
                raise
            dims, input_dims = merged, merged_input_dims
            dynamic = _generalize(call, tensors, len(args), list(kwargs), dims, input_dims, graph, source)
    signature = ExportGraphSignature(names, [f"output{i}" for i in range(len(out_leaves))], params, buffers,
                                     _mutated_buffers(recorded._table(), constant_names, buffers))
    meta = [(tuple(t.shape), t.dtype) for t in tensors]
    ep = ExportedProgram(graph, source, fusion_note, names, meta, constant_names, state_dict, out_spec, signature,
                         example_inputs if in_spec is not None else (args, kwargs), dynamic, recorded)
    ep._specialized, ep._in_spec, ep._example_tensors = specialized, in_spec, (args, kwargs)
    return ep


def default_decompositions():
    """torch.export.default_decompositions(): the table run_decompositions() uses by default. trainrun's programs
    are recorded at its dispatcher, whose ops are its kernels, so there is nothing to decompose: an empty table
    (a dict: entries a script adds or removes are accepted, and run_decompositions needs none)."""
    return {}


def export_for_training(mod, args, kwargs=None, *, dynamic_shapes=None, strict=True,
                        preserve_module_call_signature=()):
    """torch.export.export_for_training (PyTorch 2.5-2.6): the same program as export(). trainrun records
    programs at the dispatcher with nothing left to decompose, so the training IR and the inference IR are one."""
    return export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                  preserve_module_call_signature=preserve_module_call_signature)


def _mutated_buffers(table, constant_names, buffers):
    """The buffers the program writes (an in-place op's first argument), in the signature's order."""
    by_value = dict(zip(table["constants"], constant_names))
    written = set()
    for _, name, args, _, _ in table["nodes"]:
        if name.endswith("_") and args and args[0][0] == "v" and args[0][1] in by_value:
            written.add(by_value[args[0][1]])
    return [b for b in buffers if b in written]


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
    if any(isinstance(n.target, _ops.HigherOrderOperator) for n in exported.graph.nodes):
        raise ValueError("aot_compile: the program has a torch.cond, whose branches run as Python; a package cannot "
                         "hold Python code (run the ExportedProgram from Python, or make pred a Python bool)")
    _C._write_aot_package(path, exported._graph, exported._kernels_source, exported._input_names,
                          exported._constant_names, exported._dynamic)
    return path


class AOTModel:
    """A package aot_compile wrote, loaded (no Python is involved in running it): call it with the inputs. Its
    outputs come back as the module returned them when the package knows their structure (an archive does),
    otherwise as one tensor or a list."""

    def __init__(self, path, out_spec=None, keep_alive=None, in_spec=None):
        self._model = _C._AotModel(str(path))
        self.input_names = self._model.input_names
        self._out_spec, self._in_spec = out_spec, in_spec
        self._keep_alive = keep_alive  # the folder an archive was unpacked into, removed with the model

    def __call__(self, *args, **kwargs):
        if self._in_spec is not None:  # (an archive of a program exported with containers: their tensors, in order)
            args = tuple(t for t in _structured.flatten_call(self._in_spec, args, kwargs) if _C._is_cpp_tensor(t))
            kwargs = {}
        unknown = [n for n in kwargs if n not in self.input_names]
        if unknown:
            raise TypeError(f"AOTModel: unknown keyword input(s) {unknown}; the inputs are {self.input_names}")
        tensors = list(args) + [kwargs[n] for n in self.input_names[len(args):] if n in kwargs]
        try:
            outputs = self._model.run(tensors)
        except ValueError as e:  # the C++ runner's refusal of an input
            raise InputMismatchError(str(e)) from None
        if self._out_spec is not None:
            return _unflatten(self._out_spec, iter(outputs))
        return outputs[0] if len(outputs) == 1 else outputs


def aot_load(path):
    """The package at `path` (aot_compile's folder, or an archive that save() or
    trainrun._inductor.aoti_compile_and_package wrote), ready to call."""
    if _is_archive(path):
        folder, meta = _unpack(path)
        in_spec = _pytree.treespec_loads(meta["in_spec"]) if meta.get("in_spec") else None
        return AOTModel(folder.name, _spec_from_json(meta["out_spec"]), folder, in_spec)
    return AOTModel(path)


# (at the end: save/load need the classes above)
from trainrun.export._archive import _is_archive, _spec_from_json, _unpack, load, save  # noqa: E402


class _CallableModule(types.ModuleType):
    """trainrun.export(module, example_inputs) works as trainrun.export.export(...)."""

    def __call__(self, mod, args, kwargs=None, **options):
        return export(mod, args, kwargs, **options)


sys.modules[__name__].__class__ = _CallableModule
