"""torch._inductor's ahead-of-time entry points (PyTorch 2.6's AOTInductor packaging) over trainrun's:

    path = trainrun._inductor.aoti_compile_and_package(ep, package_path="model.pt2")
    model = trainrun._inductor.aoti_load_package(path)
    model(x)

The package is trainrun.export.save's archive (trainrun/export/_archive.py): the program compiled into model.so with its
frozen weights, in one file. trainrun::aot::Model (compile/aot_model.h) runs the folder it unpacks to from C++."""
import os
import tempfile

from trainrun import export as _export
from trainrun._inductor import config  # noqa: F401  (Inductor's settings, accepted; none applies to trainrun)

__all__ = ["aoti_compile_and_package", "aoti_load_package", "config"]


def aoti_compile_and_package(exported_program, _deprecated_unused_args=None, _deprecated_unused_kwargs=None, *,
                             package_path=None, inductor_configs=None):
    """Compiles the ExportedProgram and writes it to package_path (a path or a binary file; a new file named
    *.pt2 in the temporary directory when None). Returns package_path. inductor_configs are Inductor's code
    generation switches; trainrun's loops have none, so only None or an empty dict is accepted."""
    if not isinstance(exported_program, _export.ExportedProgram):
        raise TypeError(f"aoti_compile_and_package: expected an ExportedProgram (trainrun.export.export), got "
                        f"{type(exported_program).__name__}")
    if inductor_configs:
        raise ValueError(f"aoti_compile_and_package: inductor_configs {sorted(inductor_configs)} are not supported "
                         "(trainrun's generated loops take no configuration)")
    if package_path is None:
        fd, package_path = tempfile.mkstemp(suffix=".pt2", prefix="trainrun-aoti-")
        os.close(fd)
    if isinstance(package_path, (str, os.PathLike)) and not str(package_path).endswith(".pt2"):
        raise ValueError(f"aoti_compile_and_package: package_path must end in .pt2, got {str(package_path)!r}")
    _export.save(exported_program, package_path)
    return package_path


def aoti_load_package(path, run_single_threaded=False):
    """The package aoti_compile_and_package wrote, ready to call with the exported module's inputs; its outputs
    come back in the structure the module returned."""
    if not _export._is_archive(path):
        raise ValueError(f"aoti_load_package: {path!r} is not a package aoti_compile_and_package wrote")
    return _export.aot_load(path)
