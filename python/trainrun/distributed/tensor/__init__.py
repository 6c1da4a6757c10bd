"""trainrun.distributed.tensor: DTensor, as PyTorch 2.x's
torch.distributed.tensor: DeviceMesh, the placements Shard/Replicate/Partial,
distribute_tensor, DTensor.from_local/to_local/full_tensor/redistribute,
distribute_module, and factories whose random values do not depend on the
sharding (each rank draws the whole tensor from the same seed and keeps its
piece, so 1, 2 or 4 ranks and any shard dim give bitwise the same tensor)."""
from trainrun import _C
from trainrun.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
from trainrun.distributed.tensor import _ops  # noqa: F401  (operators and the dispatching functions)
from trainrun.distributed.tensor import _ops_coverage
from trainrun.distributed.tensor import _module_views  # noqa: F401  (modules' DTensor parameters)
from trainrun.distributed.tensor._dtensor import DTensor, DTensorSpec, distribute_tensor  # noqa: F401
from trainrun.distributed.tensor._redistribute import redistribute_local

_ops_coverage.install()
from trainrun.distributed.tensor import _ops_fallback  # noqa: E402
_ops_fallback.install()  # (last: what no rule above covers)
from trainrun.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard  # noqa: F401


def _factory(maker, name):
    def factory(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None, **kwargs):
        import trainrun
        from trainrun.distributed.device_mesh import mesh_or_default
        from trainrun.distributed.tensor._dtensor import _check_placements
        mesh = mesh_or_default(device_mesh, name)
        shape = list(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else list(size)
        placements = _check_placements(mesh, placements, len(shape))
        if any(p.is_partial() for p in placements):
            raise ValueError(f"{name}: Partial placements cannot be made by a factory")
        whole = maker(trainrun, shape, dtype, **kwargs)  # the same on every rank: same seed, same draws
        replicated = tuple(Replicate() for _ in placements)
        local = redistribute_local(whole, tuple(shape), mesh, replicated, placements).contiguous()
        if local is whole:
            local = whole
        if requires_grad:
            local.requires_grad_(True)
        return DTensor(local, DTensorSpec(mesh, placements, tuple(shape)))
    factory.__name__ = name
    factory.__doc__ = f"A DTensor made by trainrun.{name} (sizes as varargs or a tuple), split for the placements."
    return factory


zeros = _factory(lambda t, s, d: t.zeros(s, dtype=d), "zeros")
ones = _factory(lambda t, s, d: t.ones(s, dtype=d), "ones")
empty = _factory(lambda t, s, d: t.empty(s, dtype=d), "empty")
rand = _factory(lambda t, s, d: t.rand(s, dtype=d), "rand")
randn = _factory(lambda t, s, d: t.randn(s, dtype=d), "randn")


def full(size, fill_value, *, dtype=None, layout=None, requires_grad=False, device_mesh=None, placements=None):
    return _factory(lambda t, s, d: t.full(s, fill_value, dtype=d), "full")(
        size, dtype=dtype, requires_grad=requires_grad, device_mesh=device_mesh, placements=placements)


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None, output_fn=None):
    """Applies partition_fn(name, submodule, mesh) to every submodule, then makes every parameter it left a
    plain tensor a replicated DTensor (all of them when there is no partition_fn; buffers stay tensors), and
    installs input_fn(module, inputs, mesh) / output_fn(module, outputs, mesh) as forward pre/post hooks, as
    PyTorch's distribute_module."""
    from trainrun.distributed.device_mesh import mesh_or_default
    mesh = mesh_or_default(device_mesh, "distribute_module")
    for name, sub in list(module.named_modules()):
        if partition_fn is not None:
            partition_fn(name, sub, mesh)
        _replicate_the_rest(sub, mesh)
    if input_fn is not None:
        module.register_forward_pre_hook(lambda m, args: input_fn(m, args, mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda m, args, out: output_fn(m, out, mesh))
    return module


def _replicate_the_rest(module, mesh):
    """module's own parameters that are not DTensors yet, as replicated DTensors. (Buffers stay plain tensors,
    the same on every rank: a module's registry holds a buffer as one tensor, which C++ layers read.)"""
    from trainrun import nn
    replicate = [Replicate()] * mesh.ndim
    for key, param in list(module._named_local_parameters(False)):
        if not isinstance(getattr(module, key), DTensor):
            module.register_parameter(key, nn.Parameter(distribute_tensor(param.detach(), mesh, replicate),
                                                        param.requires_grad))


del _C


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (its submodules as attributes, imported when first read)
