"""fully_shard (PyTorch 2.x's FSDP2): shards a module's parameters over a
mesh, gathers them for its forward and reduce-scatters their gradients in
backward. No wrapper: the module's class becomes FSDP<Name>, a subclass of
FSDPModule and of its own class; parameter names do not change. Apply it to
each block, then to the root: each call makes one group of the parameters
that no inner call took."""
from trainrun import distributed as dist
from trainrun.distributed.fsdp import _schedule
from trainrun.distributed.fsdp._fsdp_param import FSDPParam
from trainrun.distributed.fsdp import _recompute  # noqa: F401  (checkpoint recomputations get gathered parameters)
from trainrun.distributed.fsdp._param_group import ParamGroup, RegatherBeforeBackward
from trainrun.distributed.fsdp._schedule import ACTIVE_FORWARDS
from trainrun.distributed.tensor._module_views import DTENSOR_PARAMS
from trainrun.nn._module import TENSORS_REPLACED_HOOKS
from trainrun.profiler import record_function

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

    def _groups(self, recurse=True):
        for m in (self.modules() if recurse else [self]):
            group = m.__dict__.get(_GROUP)
            if group is not None:
                yield group

    def unshard(self, async_op=False):
        """Gathers the parameters ahead of forward (which then gathers nothing). async_op=True returns a handle:
        its wait() waits for the gather and puts the full parameters in place."""
        group = self._fsdp()
        group.start_unshard()
        if async_op:
            return UnshardHandle(group)
        group.unshard()
        return None

    def reshard(self):
        group = self._fsdp()
        group.reshard()
        group.drop_prefetch()

    def set_requires_gradient_sync(self, requires_gradient_sync, *, recurse=True):
        """False: backward accumulates gradients locally (no reduce-scatter) until a backward with True."""
        for group in self._groups(recurse):
            group.sync_gradients = requires_gradient_sync

    def set_requires_all_reduce(self, requires_all_reduce, *, recurse=True):
        """HSDP: False skips averaging the gradient shards over the replicas (mesh dim 0) after the
        reduce-scatter, for gradient accumulation (a backward with True averages the sum once)."""
        for group in self._groups(recurse):
            group.all_reduce_replicas = requires_all_reduce

    def set_reshard_after_backward(self, reshard_after_backward, *, recurse=True):
        """False: the parameters stay gathered after backward, so the next forward gathers nothing (for
        gradient accumulation; call it with True before the optimizer step's last backward)."""
        for group in self._groups(recurse):
            group.reshard_after_backward = reshard_after_backward

    def set_unshard_in_backward(self, unshard_in_backward):
        """False: this module's parameters are not gathered again for backward, for a module whose backward reads
        none of them (an embedding's gradient needs only the indices); its gradients are still reduce-scattered.
        A backward that does read them would read freed memory: use it only where none does, as PyTorch's."""
        self._fsdp().unshard_in_backward = unshard_in_backward

    def set_is_last_backward(self, is_last_backward):
        """Accepted for PyTorch's API: every backward here waits for its reduce-scatters before it returns."""

    def set_reduce_scatter_divide_factor(self, factor):
        """Gradients are summed over the ranks, then divided by factor (instead of the mean)."""
        for group in self._groups():
            group.divide_factor = factor

    def set_modules_to_forward_prefetch(self, modules):
        """The modules whose gathers this module's pre-forward issues (instead of the next one in forward
        order)."""
        self._fsdp().forward_prefetch = [_group_of(m, "set_modules_to_forward_prefetch") for m in modules]

    def set_modules_to_backward_prefetch(self, modules):
        """The modules whose gathers this module's backward issues (instead of the previous one in forward
        order)."""
        self._fsdp().backward_prefetch = [_group_of(m, "set_modules_to_backward_prefetch") for m in modules]

    def set_post_optim_event(self, event):
        """Accepted for PyTorch's API (CUDA streams): the next forward's gathers run after the optimizer step in
        program order here."""

    # state_dict()/load_state_dict(): every module's (distributed/tensor/_module_views.py) give and take
    # sharded DTensors for the sharded parameters, or full tensors to shard. Parameters an unshard() left
    # gathered are put back to their shards first (as PyTorch's pre-state-dict hooks do).
    def state_dict(self, *args, **kwargs):
        self._reshard_gathered()
        return super().state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        self._reshard_gathered()
        return super().load_state_dict(*args, **kwargs)

    def _reshard_gathered(self):
        if ACTIVE_FORWARDS:  # (inside a forward: its parameters stay as they are)
            return
        for group in self._groups():
            if group.installed:
                group.reshard()
                group.drop_prefetch()


class UnshardHandle:
    """What unshard(async_op=True) returns."""

    def __init__(self, group):
        self._group = group

    def wait(self):
        self._group.unshard()


def _group_of(module, where):
    group = module.__dict__.get(_GROUP)
    if group is None:
        raise ValueError(f"{where}: {type(module).__name__} is not a fully_shard module")
    return group


def register_fsdp_forward_method(module, method_name):
    """Makes module.method_name (a method other than forward, e.g. generate) gather and reshard the module's
    parameters around the call, as its forward does."""
    if not isinstance(module, FSDPModule):
        raise ValueError(f"register_fsdp_forward_method: {type(module).__name__} is not a fully_shard module")
    method = getattr(type(module), method_name)
    group = module._fsdp()

    def wrapped(*args, **kwargs):
        args, kwargs = _pre_forward(group, args, kwargs)
        output = method(module, *args, **kwargs)
        replaced = _post_forward(group, output)  # a forward hook's answer: None keeps the output
        return output if replaced is None else replaced
    object.__setattr__(module, method_name, wrapped)


def _key(tensor):
    """What identifies a parameter's memory (tied weights share it): its address, or on the meta device,
    where nothing has one, the tensor itself."""
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    if local.is_meta:
        return "meta", local._cdata
    return local.data_ptr(), tuple(local.shape)


def _shards_replaced(modules, replaced):
    """to_empty or load_state_dict(assign=True) gave the modules new tensors: each group's shards are the new
    ones."""
    groups = {id(g): g for g in (m.__dict__.get(_GROUP) for m in modules) if g is not None}
    for group in groups.values():
        group.replace_shards(replaced)


TENSORS_REPLACED_HOOKS.append(_shards_replaced)


def _owned_parameters(module, ignored):
    """(owner module, name) for parameters under module not already in an inner fully_shard group and not
    ignored (keys of ignored_params). The caller reads each tensor as it shards it, so each full parameter is
    freed as soon as its shard replaces it: sharding a model built in memory needs one parameter on top."""
    out, stack = [], [module]
    while stack:
        m = stack.pop()
        if m is not module and m.__dict__.get(_GROUP) is not None:
            continue
        for name, p in m._named_local_parameters(False):
            if _key(p) not in ignored:
                out.append((m, name))
        stack.extend(reversed(list(m.children())))
    return out


def fully_shard(module, *, mesh=None, reshard_after_forward=True, shard_placement_fn=None, mp_policy=None,
                offload_policy=None, ignored_params=None):
    """Shards module's parameters (those no inner fully_shard took, less ignored_params, which stay whole and
    unreduced) along dim 0, or the dim shard_placement_fn(param) gives as Shard(dim) (None: dim 0), over mesh
    (default: all ranks; a 2-D mesh shards over its last dim and replicates over the first: HSDP). Every rank
    must hold the same initial weights. Returns the module, whose class is now FSDP<its class>."""
    modules = list(module) if isinstance(module, (list, tuple)) else [module]
    if not modules:
        raise ValueError("fully_shard: the list of modules is empty")
    if mesh is None:
        mesh = _world_mesh()
    if mesh.ndim not in (1, 2):
        raise ValueError(f"fully_shard: the mesh must be 1-D (FSDP) or 2-D (HSDP), got {mesh.ndim}-D")
    if isinstance(offload_policy, CPUOffloadPolicy) and mesh.device_type == "cpu":
        _notice_offload_is_a_no_op()
    mp_policy = mp_policy or MixedPrecisionPolicy()
    n, rank = mesh.size(mesh.ndim - 1), mesh.get_local_rank(mesh.ndim - 1)
    ignored = {_key(p) for p in (ignored_params or ())}
    params, by_storage = [], {}
    for owner, name in [owned for m in modules for owned in _owned_parameters(m, ignored)]:
        tensor = owner._param(name)
        key = _key(tensor)  # tied weights: one slot list, one shard
        if key in by_storage:
            by_storage[key].add_slot(owner, name)
            continue
        outer = (owner.__dict__.get(DTENSOR_PARAMS) or {}).get(name)  # tensor parallelism's DTensor, if any
        outer = outer if outer is not None and outer.device_mesh != mesh else None
        dim = _shard_dim(shard_placement_fn, tensor if outer is None else outer, name)
        p = FSDPParam(owner, name, tensor, n, rank, outer, dim)
        by_storage[key] = p
        params.append(p)
    group = ParamGroup(params, mesh, mp_policy, reshard_after_forward)
    for m in modules:
        object.__setattr__(m, _GROUP, group)
    if len(modules) == 1:
        # Even a group without parameters of its own (a root over sharded blocks) hooks its forward: the
        # outermost running forward is the root, which keeps its parameters for backward.
        modules[0].register_forward_pre_hook(lambda m, args, kwargs: _pre_forward(group, args, kwargs),
                                             prepend=True, with_kwargs=True)
        modules[0].register_forward_hook(lambda m, args, output: _post_forward(group, output))
    else:
        _hook_module_list(group, modules)
    for m in modules:
        cls = type(m)
        if not issubclass(cls, FSDPModule):
            m.__class__ = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {"__module__": cls.__module__})
    return module


def _world_mesh():
    """A 1-D mesh over every rank (its group is the default group: nothing is created, init_device_mesh's
    root mesh is left alone)."""
    from trainrun.distributed.device_mesh import DeviceMesh
    return DeviceMesh("cpu", list(range(dist.get_world_size())), _init_backend=False)


def _shard_dim(shard_placement_fn, param, name):
    from trainrun.distributed.tensor.placement_types import Shard
    placement = shard_placement_fn(param) if shard_placement_fn is not None else None
    if placement is None:
        return 0
    if type(placement) is not Shard:
        raise ValueError(f"fully_shard: shard_placement_fn must return Shard(dim) or None, got {placement!r} for "
                         f"{name}")
    ndim = len(param.shape)
    if not -ndim <= placement.dim < ndim:
        raise ValueError(f"fully_shard: shard_placement_fn gave {placement!r} for {name} of {ndim} dims")
    return placement.dim % ndim


_NOTICES = set()


def _notice_offload_is_a_no_op():
    if "offload" not in _NOTICES:
        _NOTICES.add("offload")
        import warnings
        warnings.warn("fully_shard: CPUOffloadPolicy on a CPU job: the shards and optimizer state already live in "
                      "CPU memory, so there is nothing to move", stacklevel=3)


def _hook_module_list(group, modules):
    """One group over several modules (tied weights: an embedding and the output head): gathered before
    the first of them runs, resharded after the last has run. Each module's outputs gather the group again
    in backward, since autograd may reach any of them first."""
    group.modules_to_run = None

    def pre(m, args, kwargs):
        if group.modules_to_run is None:  # the first of the group's modules in this forward
            group.modules_to_run = {id(x) for x in modules}
            return _pre_forward(group, args, kwargs)
        return _cast_inputs(group, args, kwargs)

    def post(m, args, output):
        if group.modules_to_run is None:
            return None
        group.modules_to_run.discard(id(m))
        if group.modules_to_run:
            return _wrap_for_backward(group, output) if _frees_after_forward(group) else None
        group.modules_to_run = None
        return _post_forward(group, output)

    _LIST_GROUPS.append(group)
    for m in modules:
        m.register_forward_pre_hook(pre, prepend=True, with_kwargs=True)
        m.register_forward_hook(post)


_LIST_GROUPS = []  # groups over several modules: a forward that skipped one of them must not leave them gathered


@record_function("FSDP::pre_forward")
def _pre_forward(group, args, kwargs):
    if group in ACTIVE_FORWARDS:  # left by a forward that raised
        ACTIVE_FORWARDS.remove(group)
    if not ACTIVE_FORWARDS:  # a new forward from the root: no list group stays gathered from the last one
        for stale in _LIST_GROUPS:
            if stale is not group and stale.modules_to_run is not None:
                stale.modules_to_run = None
                stale.reshard()
    ACTIVE_FORWARDS.append(group)
    _schedule.forward_started(group)  # gathers this group's parameters, issues the next group's gather
    return _cast_inputs(group, args, kwargs)


def _cast_inputs(group, args, kwargs):
    dtype = group.mp_policy.param_dtype
    if dtype is not None and group.mp_policy.cast_forward_inputs:
        from trainrun import _C

        def cast(x):
            return x.to(dtype) if _C._is_cpp_tensor(x) and x.is_floating_point() else x
        args = tuple(cast(a) for a in args)
        kwargs = {k: cast(v) for k, v in kwargs.items()}
    return args, kwargs


@record_function("FSDP::post_forward")
def _post_forward(group, output):
    from trainrun import _C
    from trainrun._autograd import is_grad_enabled
    is_root = bool(ACTIVE_FORWARDS) and ACTIVE_FORWARDS[0] is group
    if group in ACTIVE_FORWARDS:  # with whatever opened inside it and did not close (a list group cut short)
        del ACTIVE_FORWARDS[ACTIVE_FORWARDS.index(group):]
    group.reshard()
    replaced = None
    dtype = group.mp_policy.output_dtype
    if dtype is not None and _C._is_cpp_tensor(output) and output.is_floating_point():
        output = replaced = output.to(dtype)
    if not is_grad_enabled():
        group.gathered = None  # no graph holds the gathered parameters: their memory goes now
    elif _frees_after_forward(group):
        wrapped = _wrap_for_backward(group, output)
        if wrapped is not None:  # outputs autograd can reach the module through: free, gather again in backward
            group.free_after_forward()
            replaced = wrapped
    if is_root:
        _schedule.forward_finished(group)
    return replaced


def _frees_after_forward(group):
    """The root keeps its parameters (backward starts with it), as PyTorch's FSDP2 does; so does a forward
    that builds no graph (nothing holds the gathered parameters after it)."""
    from trainrun._autograd import is_grad_enabled
    is_root = not ACTIVE_FORWARDS
    return group.reshard_after_forward and not is_root and is_grad_enabled()


def _wrap_for_backward(group, output):
    """output with its tensors that need a gradient passed through RegatherBeforeBackward (None when none)."""
    from trainrun import _C
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    needs_grad = [i for i, o in enumerate(outputs) if _C._is_cpp_tensor(o) and o.requires_grad]
    if not needs_grad:
        return None
    wrapped = RegatherBeforeBackward.apply(group, *[outputs[i] for i in needs_grad])
    wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
    rebuilt = list(outputs)
    for i, w in zip(needs_grad, wrapped):
        rebuilt[i] = w
    if _C._is_cpp_tensor(output):
        return rebuilt[0]
    return type(output)(rebuilt) if isinstance(output, list) else tuple(rebuilt)
