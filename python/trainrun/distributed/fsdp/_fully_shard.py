"""fully_shard (PyTorch 2.x's FSDP2): shards a module's parameters over a
mesh, gathers them for its forward and reduce-scatters their gradients in
backward. No wrapper: the module's class becomes FSDP<Name>, a subclass of
FSDPModule and of its own class; parameter names do not change. Apply it to
each block, then to the root: each call makes one group of the parameters
that no inner call took."""
from trainrun import distributed as dist
from trainrun.distributed.fsdp._param_group import FSDPParam, ParamGroup, RegatherBeforeBackward

_GROUP = "_fsdp_group"


class MixedPrecisionPolicy:
    """param_dtype: what forward computes with (the gathered parameters); reduce_dtype: what gradients are
    reduced in; output_dtype: the root's outputs; cast_forward_inputs: cast floating inputs to param_dtype."""

    def __init__(self, param_dtype=None, reduce_dtype=None, output_dtype=None, cast_forward_inputs=True):
        self.param_dtype, self.reduce_dtype = param_dtype, reduce_dtype
        self.output_dtype, self.cast_forward_inputs = output_dtype, cast_forward_inputs


class OffloadPolicy:
    """No offloading (the default)."""


class CPUOffloadPolicy(OffloadPolicy):
    """Shards kept on the CPU. On a CPU-only job they already are: accepted, with nothing to move."""

    def __init__(self, pin_memory=True):
        self.pin_memory = pin_memory


class FSDPModule:
    """What fully_shard adds to a module's class."""

    def _fsdp(self):
        return self.__dict__[_GROUP]

    def unshard(self, async_op=False):
        self._fsdp().unshard()
        return _Done() if async_op else None

    def reshard(self):
        self._fsdp().reshard()

    def set_requires_gradient_sync(self, requires_gradient_sync, *, recurse=True):
        """False: backward accumulates gradients locally (no reduce-scatter) until a backward with True."""
        for m in (self.modules() if recurse else [self]):
            group = m.__dict__.get(_GROUP)
            if group is not None:
                group.sync_gradients = requires_gradient_sync

    def set_reshard_after_backward(self, reshard_after_backward, *, recurse=True):
        pass  # the gathered parameters are always freed after their reduce-scatter (when resharding after forward)

    def set_is_last_backward(self, is_last_backward):
        pass

    def set_reduce_scatter_divide_factor(self, factor):
        for m in self.modules():
            group = m.__dict__.get(_GROUP)
            if group is not None:
                group.divide_factor = factor

    def set_modules_to_forward_prefetch(self, modules):
        pass  # gathers run when each module starts; prefetching on a communication thread is future work

    def set_modules_to_backward_prefetch(self, modules):
        pass

    def state_dict(self, *args, **kwargs):
        """Sharded DTensors for the sharded parameters (no communication); full_tensor() of each gives the
        full state dict."""
        import collections
        out = collections.OrderedDict()
        plain = super(FSDPModule, self).state_dict(*args, **kwargs)
        views = _dtensor_views(self)
        for key, value in plain.items():
            out[key] = views.get(key, value)
        return out

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Takes sharded DTensors (this layout) or full tensors (each rank keeps its shard)."""
        from trainrun.distributed.tensor._dtensor import DTensor
        views = _dtensor_views(self)
        local = {}
        for key, value in state_dict.items():
            if key in views:
                view = views[key]
                if isinstance(value, DTensor):
                    value = value.to_local()
                elif tuple(value.shape) == tuple(view.shape):
                    value = _shard_of(value, view)
                local[key] = value
            else:
                local[key] = value
        return super(FSDPModule, self).load_state_dict(local, strict)


class _Done:
    def wait(self):
        return None


def _shard_of(full, view):
    from trainrun.distributed.tensor._redistribute import redistribute_local
    from trainrun.distributed.tensor.placement_types import Replicate
    replicated = tuple(Replicate() for _ in view.placements)
    return redistribute_local(full.detach(), tuple(view.shape), view.device_mesh, replicated, view.placements)


def _dtensor_views(root):
    """name -> DTensor for every sharded parameter under root (by its state_dict key)."""
    views = {}
    for prefix, m in root.named_modules():
        group = m.__dict__.get(_GROUP)
        if group is None:
            continue
        for p in group.params:
            for owner, name in p.slots:
                for owner_prefix, candidate in root.named_modules():
                    if candidate is owner:
                        views[(owner_prefix + "." if owner_prefix else "") + name] = group.dtensor(p)
    return views


def _owned_parameters(module):
    """(owner module, name, tensor) for parameters under module not already in an inner fully_shard group."""
    out, stack = [], [module]
    while stack:
        m = stack.pop()
        if m is not module and m.__dict__.get(_GROUP) is not None:
            continue
        for name, p in m.named_parameters(False):
            out.append((m, name, p))
        stack.extend(reversed(list(m.children())))
    return out


def fully_shard(module, *, mesh=None, reshard_after_forward=True, shard_placement_fn=None, mp_policy=None,
                offload_policy=None, ignored_params=None):
    """Shards module's parameters (those no inner fully_shard took) along dim 0 over mesh (default: all
    ranks; a 2-D mesh shards over its last dim and replicates over the first: HSDP). Every rank must hold
    the same initial weights. Returns the module, whose class is now FSDP<its class>."""
    from trainrun.distributed.device_mesh import init_device_mesh
    if isinstance(module, (list, tuple)):
        raise NotImplementedError("fully_shard: a list of modules (one group over several) is not supported yet")
    if shard_placement_fn is not None or ignored_params:
        raise NotImplementedError("fully_shard: shard_placement_fn and ignored_params are not supported yet")
    if mesh is None:
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    if mesh.ndim not in (1, 2):
        raise ValueError(f"fully_shard: the mesh must be 1-D (FSDP) or 2-D (HSDP), got {mesh.ndim}-D")
    mp_policy = mp_policy or MixedPrecisionPolicy()
    n, rank = mesh.size(mesh.ndim - 1), mesh.get_local_rank(mesh.ndim - 1)
    params, by_storage = [], {}
    for owner, name, tensor in _owned_parameters(module):
        key = (tensor.data_ptr(), tuple(tensor.shape))  # tied weights: one slot list, one shard
        if key in by_storage:
            by_storage[key].add_slot(owner, name)
            continue
        p = FSDPParam(owner, name, tensor, n, rank)
        by_storage[key] = p
        params.append(p)
    if not isinstance(reshard_after_forward, bool):
        raise NotImplementedError("fully_shard: reshard_after_forward=int (resharding to a smaller group) is not "
                                  "supported yet; pass True or False")
    group = ParamGroup(params, mesh, mp_policy, reshard_after_forward)
    object.__setattr__(module, _GROUP, group)
    # Even a group without parameters of its own (a root over sharded blocks) hooks its forward: the
    # outermost running forward is the root, which keeps its parameters for backward.
    module.register_forward_pre_hook(lambda m, args, kwargs: _pre_forward(group, args, kwargs), prepend=True,
                                     with_kwargs=True)
    module.register_forward_hook(lambda m, args, output: _post_forward(group, output))
    cls = type(module)
    if not issubclass(cls, FSDPModule):
        module.__class__ = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {"__module__": cls.__module__})
    return module


_ACTIVE_FORWARDS = []  # the groups whose forward is running, outermost first


def _pre_forward(group, args, kwargs):
    if group in _ACTIVE_FORWARDS:  # left by a forward that raised
        _ACTIVE_FORWARDS.remove(group)
    _ACTIVE_FORWARDS.append(group)
    group.unshard()
    dtype = group.mp_policy.param_dtype
    if dtype is not None and group.mp_policy.cast_forward_inputs:
        from trainrun import _C

        def cast(x):
            return x.to(dtype) if isinstance(x, _C.Tensor) and x.is_floating_point() else x
        args = tuple(cast(a) for a in args)
        kwargs = {k: cast(v) for k, v in kwargs.items()}
    return args, kwargs


def _post_forward(group, output):
    from trainrun import _C
    from trainrun._autograd import is_grad_enabled
    if _ACTIVE_FORWARDS and _ACTIVE_FORWARDS[-1] is group:
        _ACTIVE_FORWARDS.pop()
    group.reshard()
    replaced = None
    dtype = group.mp_policy.output_dtype
    if dtype is not None and isinstance(output, _C.Tensor) and output.is_floating_point():
        output = replaced = output.to(dtype)
    # The root keeps its parameters (backward starts with it), as PyTorch's FSDP2 does; so does a forward
    # that builds no graph (nothing holds the gathered parameters after it).
    is_root = not _ACTIVE_FORWARDS
    if group.reshard_after_forward and not is_root and is_grad_enabled():
        outputs = output if isinstance(output, (tuple, list)) else (output,)
        needs_grad = [i for i, o in enumerate(outputs) if isinstance(o, _C.Tensor) and o.requires_grad]
        if needs_grad:  # outputs autograd can reach the module through: free, and gather again in backward
            wrapped = RegatherBeforeBackward.apply(group, *[outputs[i] for i in needs_grad])
            wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
            rebuilt = list(outputs)
            for i, w in zip(needs_grad, wrapped):
                rebuilt[i] = w
            group.free_gathered()
            if isinstance(output, _C.Tensor):
                replaced = rebuilt[0]
            else:
                replaced = type(output)(rebuilt) if isinstance(output, list) else tuple(rebuilt)
    return replaced
