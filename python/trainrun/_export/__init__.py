"""torch._export's AOTInductor entry points of PyTorch 2.2-2.5, over trainrun's (trainrun.export.aot_compile):

    path = trainrun._export.aot_compile(model, (x,))   # export + compile; the package's path
    run = trainrun._export.aot_load(path, "cpu")
    run(x)

PyTorch 2.6 names these torch._inductor.aoti_compile_and_package and aoti_load_package (trainrun/_inductor)."""
import os
import tempfile

from trainrun import export as _export

__all__ = ["aot_compile", "aot_load"]


def aot_compile(f, args, kwargs=None, *, dynamic_shapes=None, options=None, remove_runtime_assertions=False,
                disable_constraint_solver=False, same_signature=True):
    """Exports f (a module) on the example args and writes its AOT package: the folder options
    {"aot_inductor.output_path": path} names, else a new one in the temporary directory. Returns the path."""
    options = dict(options or {})
    path = options.pop("aot_inductor.output_path", None)
    if options:
        raise ValueError(f"aot_compile: options {sorted(options)} are not supported (trainrun's generated loops "
                         "take no configuration; 'aot_inductor.output_path' names where the package goes)")
    if not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    exported = _export.export(f, args, kwargs, dynamic_shapes=dynamic_shapes)
    if path is None:
        path = os.path.join(tempfile.mkdtemp(prefix="trainrun-aot-"), "model.aot")
    return _export.aot_compile(exported, path)


def aot_load(so_path, device):
    """The package aot_compile wrote, as a callable taking the exported module's inputs. device: where it runs;
    trainrun's packages run their CPU program, so "cpu" (or a CPU torch.device)."""
    if str(device) != "cpu":
        raise ValueError(f"aot_load: device {device!r}: trainrun's AOT packages run on the CPU")
    return _export.aot_load(so_path)
