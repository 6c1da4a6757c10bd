"""trainrun.export.save/load: one file holding the AOT package and what Python needs to rebuild the
ExportedProgram."""
import importlib
import json
import os
import tempfile
import zipfile

from trainrun import _C
from trainrun.export import ExportedProgram, ExportGraphSignature, aot_compile
from trainrun.utils._pytree import treespec_dumps, treespec_loads

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
        args, kwargs = ep._example_tensors
        examples = {f"arg{i}": t for i, t in enumerate(args)}
        examples.update({f"kwarg.{k}": t for k, t in kwargs.items()})
        trainrun.save({k: v.contiguous() for k, v in examples.items()}, os.path.join(d, "example_inputs.safetensors"))
        unread = {k: v.contiguous() for k, v in ep.state_dict.items() if k not in ep._constant_names}
        if unread:  # (weights the program does not read: in its state_dict, not in the package)
            trainrun.save(unread, os.path.join(d, "unread_weights.safetensors"))
        sig = ep.graph_signature
        meta = {"format": _ARCHIVE_FORMAT, "input_names": ep._input_names,
                "input_meta": [[list(shape), str(dtype).replace("trainrun.", "")] for shape, dtype in ep._input_meta],
                "constant_names": ep._constant_names, "out_spec": _spec_to_json(ep._out_spec),
                "fusion_note": ep._fusion_note, "num_args": len(args), "kwarg_names": list(kwargs),
                "specialized": [list(entry) for entry in ep._specialized],
                "in_spec": None if ep._in_spec is None else treespec_dumps(ep._in_spec),
                "signature": {"user_inputs": sig.user_inputs, "user_outputs": sig.user_outputs,
                              "parameters": sig.parameters, "buffers": sig.buffers,
                              "mutated_buffers": sig.mutated_buffers}}
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


def _weight_order(meta):
    """The weights' names in the signature's order (parameters, then buffers)."""
    return meta["signature"]["parameters"] + meta["signature"]["buffers"]


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
    unread_path = os.path.join(folder.name, "unread_weights.safetensors")
    if os.path.exists(unread_path):
        unread = trainrun.load(unread_path)
        constants.update((k, unread[k]) for k in _weight_order(meta) if k in unread)
    names = _weight_order(meta)  # (the signature's order, then the tensor constants)
    constants = {**{k: constants[k] for k in names if k in constants}, **constants}
    s = meta["signature"]
    signature = ExportGraphSignature(s["user_inputs"], s["user_outputs"], s["parameters"], s["buffers"],
                                     s.get("mutated_buffers", ()))
    input_meta = [(tuple(shape), getattr(trainrun, dtype)) for shape, dtype in meta["input_meta"]]
    ep = ExportedProgram(graph, kernels_source, meta["fusion_note"], meta["input_names"], input_meta,
                         meta["constant_names"], constants, _spec_from_json(meta["out_spec"]), signature,
                         (args, kwargs), model.dynamic)
    ep._specialized = [tuple(entry) for entry in meta.get("specialized", [])]
    if meta.get("in_spec"):  # (exported with containers: calls are flattened by that structure again)
        ep._in_spec = treespec_loads(meta["in_spec"])
    ep._keep_alive = (folder, model)  # the unpacked model.so backs the program's loops
    return ep
