"""parallelize_module: applies tensor-parallel styles to a module's
submodules by name (plan keys are dotted names; "*" matches one level, as
in "layers.*.attention.wq"), as PyTorch's."""
import fnmatch

from trainrun.distributed.tensor.parallel.style import ParallelStyle


def parallelize_module(module, device_mesh=None, parallelize_plan=None, *, src_data_rank=0):
    """Shards module (or the submodules the plan names) over device_mesh (a 1-D mesh, e.g. mesh["tp"]);
    returns the module. Every rank must hold the same initial weights (seed alike)."""
    from trainrun.distributed.device_mesh import mesh_or_default
    mesh = mesh_or_default(device_mesh, "parallelize_module")
    if parallelize_plan is None:
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        return parallelize_plan._apply(module, mesh)
    if not isinstance(parallelize_plan, dict):
        raise TypeError(f"parallelize_module: the plan must be a ParallelStyle or a dict of them, got "
                        f"{type(parallelize_plan).__name__}")
    names = [name for name, _ in module.named_modules() if name]
    for pattern, style in parallelize_plan.items():
        matched = [n for n in names if fnmatch.fnmatchcase(n, pattern) and n.count(".") == pattern.count(".")]
        if not matched:
            raise ValueError(f"parallelize_module: no submodule matches {pattern!r}")
        for name in matched:
            style._apply(module.get_submodule(name), mesh)
    return module
