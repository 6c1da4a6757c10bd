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

__all__ = ["export", "ExportedProgram", "ExportGraphSignature", "save", "load", "Dim"]

_exporting = 0  # export() calls recording now (trainrun.compiler.is_exporting)


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

    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        """The program is recorded at the dispatcher, so its nodes are trainrun's ops already (no composite ops to
        break down): returns the program itself."""
        return self

    @property
    def graph(self):
        return str(self._graph)

    def __str__(self):
        return (f"ExportedProgram({', '.join(self._input_names)}): {self._graph.num_nodes} nodes, "
                f"{len(self.state_dict)} frozen weights; {self._fusion_note}\n{self._graph}")


class Dim:
    """torch.export.Dim(name, min=None, max=None): a dimension that varies, for dynamic_shapes. export refuses
    dynamic_shapes (it records one program per shape), so a Dim only names itself in that refusal."""

    def __init__(self, name, *, min=None, max=None):  # noqa: A002
        if not isinstance(name, str) or not name:
            raise ValueError(f"Dim: the name must be a non-empty string, got {name!r}")
        if min is not None and max is not None and min > max:
            raise ValueError(f"Dim {name!r}: min ({min}) is greater than max ({max})")
        self.__name__, self.min, self.max = name, min, max

    def __repr__(self):
        return f"Dim({self.__name__!r}, min={self.min}, max={self.max})"


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
        raise NotImplementedError(f"trainrun.export: dynamic_shapes ({dynamic_shapes!r}) is not supported; the "
                                  "program is exported for the example inputs' shapes (export once per shape)")
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
                         (args, kwargs))
    ep._keep_alive = (folder, model)  # the unpacked model.so backs the program's loops
    return ep


class _CallableModule(types.ModuleType):
    """trainrun.export(module, example_inputs) works as trainrun.export.export(...)."""

    def __call__(self, mod, args, kwargs=None, **options):
        return export(mod, args, kwargs, **options)


sys.modules[__name__].__class__ = _CallableModule
