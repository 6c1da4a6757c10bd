"""trainrun.export: a module's forward captured whole, with its weights frozen, and compiled ahead of time.

    ep = trainrun.export.export(model, (x,))      # or trainrun.export(model, (x,)); an ExportedProgram
    ep.module()(x)                                # runs the program (its pointwise runs fused)
    trainrun.aot_compile(ep, "model.aot")         # a folder: model.so (the program and its loops) + weights
    trainrun.aot_load("model.aot")(x)             # or from C++: trainrun::aot::Model m(path); m.run({x})

The forward is recorded at the dispatcher under no_grad (compile/graph_capture.h), so a module written in C++
or Python is seen alike; what cannot be captured (a tensor's values read into Python, hooks, collectives) is
an error naming it, as torch.export's. The parameters and buffers it reads are copied when exported: training
the module afterwards does not change the program. Inputs are tensors (positional, or keywords by name) of
the example's shapes and dtypes; a call with another shape is refused, naming the input."""
import inspect
import sys
import types

from trainrun import _C
from trainrun._compile import GraphBreakError, _flatten, _unflatten

__all__ = ["export", "ExportedProgram", "ExportGraphSignature"]


class ExportGraphSignature:
    """Names of the program's inputs (user_inputs), outputs, and frozen weights (parameters, buffers)."""

    def __init__(self, user_inputs, user_outputs, parameters, buffers):
        self.user_inputs, self.user_outputs = list(user_inputs), list(user_outputs)
        self.parameters, self.buffers = list(parameters), list(buffers)

    def __repr__(self):
        return (f"ExportGraphSignature(user_inputs={self.user_inputs}, user_outputs={self.user_outputs}, "
                f"parameters={self.parameters}, buffers={self.buffers})")


class ExportedProgram:
    """A captured forward: run it with module() (or call it), write it with trainrun.aot_compile."""

    def __init__(self, graph, kernels_source, fusion_note, input_names, input_meta, constant_names, state_dict,
                 out_spec, signature, example_inputs):
        self._graph, self._kernels_source, self._fusion_note = graph, kernels_source, fusion_note
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
            if tuple(t.shape) != shape:
                raise ValueError(f"ExportedProgram: input '{name}' has shape {list(t.shape)}; the program was "
                                 f"exported for {list(shape)}")
            if t.dtype != dtype:
                raise ValueError(f"ExportedProgram: input '{name}' is {t.dtype}; the program was exported for {dtype}")

    def __call__(self, *args, **kwargs):
        tensors = list(args) + [kwargs[n] for n in self._input_names[len(args):] if n in kwargs]
        self._check(tensors)
        with _no_grad():
            outputs = self._graph.run([t.contiguous() for t in tensors])
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
    def graph(self):
        return str(self._graph)

    def __str__(self):
        return (f"ExportedProgram({', '.join(self._input_names)}): {self._graph.num_nodes} nodes, "
                f"{len(self.state_dict)} frozen weights; {self._fusion_note}\n{self._graph}")


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
    dynamic_shapes is not supported (the program is for the example's shapes): a non-None value is refused."""
    if dynamic_shapes is not None:
        raise NotImplementedError("trainrun.export: dynamic_shapes is not supported; the program is exported for "
                                  "the example inputs' shapes (export once per shape)")
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
    call_args, call_kwargs = tensors[:len(args)], dict(zip(kwargs, tensors[len(args):]))
    graph = _C._CapturedGraph()
    capture = _C._GraphCapture(graph, tensors)
    with _no_grad(), capture:
        result = mod(*call_args, **call_kwargs)
        out_leaves = []
        out_spec = _flatten(result, out_leaves)
        capture.finish(out_leaves)
    if capture.broken:
        raise GraphBreakError(f"export: {type(mod).__name__}.forward could not be captured whole: "
                              f"{capture.break_reason}")
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
    signature = ExportGraphSignature(names, [f"output{i}" for i in range(len(out_leaves))], params, buffers)
    meta = [(tuple(t.shape), t.dtype) for t in tensors]
    return ExportedProgram(graph, source, fusion_note, names, meta, constant_names, dict(zip(constant_names, frozen)),
                           out_spec, signature, (args, kwargs))


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
                          exported._constant_names)
    return path


class AOTModel:
    """A package aot_compile wrote, loaded (no Python is involved in running it): call it with the inputs."""

    def __init__(self, path):
        self._model = _C._AotModel(str(path))
        self.input_names = self._model.input_names

    def __call__(self, *args, **kwargs):
        tensors = list(args) + [kwargs[n] for n in self.input_names[len(args):] if n in kwargs]
        outputs = self._model.run(tensors)
        return outputs[0] if len(outputs) == 1 else outputs


def aot_load(path):
    """The package at `path` (aot_compile's folder), ready to call."""
    return AOTModel(path)


class _CallableModule(types.ModuleType):
    """trainrun.export(module, example_inputs) works as trainrun.export.export(...)."""

    def __call__(self, mod, args, kwargs=None, **options):
        return export(mod, args, kwargs, **options)


sys.modules[__name__].__class__ = _CallableModule
