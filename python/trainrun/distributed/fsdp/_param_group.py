"""One fully_shard call's parameters: sharded along dim 0 over the mesh
(torch.chunk's pieces), gathered for forward with one all-gather over a
flat buffer, and their gradients reduced with one reduce-scatter (the mean
over the ranks) into the shards' .grad.

The gathered parameters are outputs of an autograd Function whose backward
is that reduce-scatter, so autograd itself delivers each rank's gradient
shard; between forwards the module's registry holds the shards (what
optimizers and state_dict see).

reshard_after_forward: after the module's forward, the memory of the
gathered parameters is freed (their storages resized to 0, though autograd
still holds the tensors), and an identity Function on the module's outputs
gathers them again into the same storages when backward reaches the module;
after the reduce-scatter they are freed again. Peak memory then holds one
group's full parameters at a time instead of every group's."""
from trainrun import _C
from trainrun import distributed as dist
from trainrun.autograd import Function
from trainrun.nn import utils as nn_utils
from trainrun.distributed.tensor import _redistribute
from trainrun.distributed.tensor._dtensor import DTensor, DTensorSpec
from trainrun.distributed.tensor._module_views import set_view, views_off
from trainrun.distributed.tensor.placement_types import Replicate, Shard, chunk_offsets, chunk_sizes


class FSDPParam:
    """A parameter slot (module, name) of a group, with its global shape and this rank's shard."""

    def __init__(self, module, name, full, group_size, rank):
        self.slots = [(module, name)]
        self.shape = tuple(full.shape)
        self.rows = chunk_sizes(self.shape[0], group_size)
        self.padded_rows = -(-self.shape[0] // group_size)
        self.row_numel = int(full.numel() // max(self.shape[0], 1)) if self.shape[0] else 0
        start = chunk_offsets(self.shape[0], group_size)[rank]
        shard = full.detach().narrow(0, start, self.rows[rank]).contiguous().clone()
        shard.requires_grad_(full.requires_grad)
        self.shard = shard
        for m, n in self.slots:
            m._replace_parameter(n, shard)

    def add_slot(self, module, name):
        self.slots.append((module, name))
        module._replace_parameter(name, self.shard)

    def install(self, tensor, full):
        """Puts tensor (the shard, or the gathered parameter while full) in every slot; while full, the
        modules' attributes give it too (their forward reads self.weight)."""
        for m, n in self.slots:
            m._replace_parameter(n, tensor)
            views_off(m, full)


class ParamGroup:
    def __init__(self, params, mesh, mp_policy, reshard_after_forward=True):
        self.params, self.mesh, self.mp_policy = params, mesh, mp_policy
        self.reshard_after_forward = reshard_after_forward
        self.gathers = []  # this forward's gathers: (params, sends' dtype, output buffers)
        self.freed = False
        self.shard_dim = mesh.ndim - 1  # the last mesh dim shards; a leading one replicates (HSDP)
        self.sync_gradients = True
        self.pending = None  # unsharded gradients held back while sync is off
        self.divide_factor = None
        for p in params:  # module.weight shows the DTensor over the shard
            for module, name in p.slots:
                set_view(module, name, self.dtensor(p))
            # clip_grad_norm_ adds the shards' norms over the shard dim (replicas hold the same shard)
            nn_utils.register_sharded_parameter(p.shard, _redistribute.reducer_over(mesh, self.shard_dim))

    # ---- layout ---------------------------------------------------------------------------------
    def local_spec(self, p):
        placements = [Replicate()] * (self.mesh.ndim - 1) + [Shard(0)]
        return DTensorSpec(self.mesh, placements, p.shape)

    def dtensor(self, p):
        return DTensor(p.shard, self.local_spec(p))

    # ---- forward: gather ----------------------------------------------------------------------------
    def unshard(self):
        self.gathers, self.freed = [], False
        trainable = [p for p in self.params if p.shard.requires_grad]
        frozen = [p for p in self.params if not p.shard.requires_grad]
        fulls = _GatherParams.apply(self, *[p.shard for p in trainable]) if trainable else ()
        if len(trainable) == 1 and not isinstance(fulls, tuple):
            fulls = (fulls,)
        for p, full in zip(trainable, fulls):
            p.install(full, True)
        if frozen:
            with _no_grad():
                for p, full in zip(frozen, self._gather([p.shard for p in frozen], frozen)):
                    p.install(full, True)

    def reshard(self):
        for p in self.params:
            p.install(p.shard, False)

    # ---- freeing the gathered parameters between forward and backward ---------------------------------
    def free_gathered(self, trainable_only=False):
        """Gives back the memory of this forward's gathered parameters; autograd keeps the tensors.
        trainable_only (after the reduce-scatter): frozen parameters may still be read by backward nodes that
        run later, so they are only let go (autograd frees them with the graph)."""
        if trainable_only:
            self.gathers = [g for g in self.gathers if g[0][0].shard.requires_grad]
        for _, _, outs in self.gathers:
            for o in outs:
                o.untyped_storage().resize_(0)
        self.freed = bool(self.gathers)

    def regather(self):
        """Gathers the shards again into the freed storages (before backward reads them). The writes do not
        count as in-place modifications: autograd saved these very tensors, and they get their values back."""
        if not self.freed:
            return
        from trainrun.autograd import _unsafe_preserve_version_counter
        for params, dtype, outs in self.gathers:
            sends = []
            for p, o in zip(params, outs):
                o.untyped_storage().resize_(o.numel() * o.element_size())
                sends.append(_padded(p.shard.detach().reshape([-1]).to(dtype), p.padded_rows * p.row_numel))
            guards = [_unsafe_preserve_version_counter(o) for o in outs]
            for g in guards:
                g.__enter__()
            try:
                _redistribute.communicate("all_gather", dist.all_gather_into_tensor_coalesced, outs, sends,
                                          group=self.mesh.get_group(self.shard_dim))
            finally:
                for g in guards:
                    g.__exit__(None, None, None)
        self.freed = False

    def _gather(self, shards, params):
        """The full parameters from every rank's shards: one coalesced all-gather of the padded shards
        (each rank's the same size). torch.chunk leaves padding only after the last real rows, so each
        full parameter is a prefix of its gathered buffer: a view, not a copy."""
        n = self.mesh.size(self.shard_dim)
        dtype = self.mp_policy.param_dtype or shards[0].dtype
        sends, outs = [], []
        for s, p in zip(shards, params):
            sends.append(_padded(s.detach().reshape([-1]).to(dtype), p.padded_rows * p.row_numel))
            outs.append(_C.empty([n * p.padded_rows * p.row_numel], dtype=dtype, device=s.device))
        _redistribute.communicate("all_gather", dist.all_gather_into_tensor_coalesced, outs, sends,
                                  group=self.mesh.get_group(self.shard_dim))
        if self.reshard_after_forward:  # kept to gather into again (else the graph alone holds them)
            self.gathers.append((list(params), dtype, outs))
        return [o.view([n * p.padded_rows] + list(p.shape[1:])).narrow(0, 0, p.shape[0])
                for o, p in zip(outs, params)]

    # ---- backward: reduce-scatter ----------------------------------------------------------------
    def reduce(self, grads, params):
        """The mean over the shard ranks (and over the replicate dim, for HSDP) of each full gradient,
        as this rank's shard of it."""
        grads = [g if g is not None else _C.zeros(list(p.shape), dtype=p.shard.dtype) for g, p in zip(grads, params)]
        if self.pending is not None:
            grads = [g + h for g, h in zip(grads, self.pending)]
            self.pending = None
        if not self.sync_gradients:
            self.pending = [g.detach().clone() for g in grads]
            return [_C.zeros(list(p.shard.shape), dtype=p.shard.dtype) for p in params]
        n = self.mesh.size(self.shard_dim)
        reduce_dtype = self.mp_policy.reduce_dtype or params[0].shard.dtype
        # Chunk r of each padded gradient is rank r's rows (torch.chunk's, padding after the last); the
        # outputs are views of one flat buffer, so that HSDP's average over replicas is one all-reduce.
        out = _C.empty([sum(p.padded_rows * p.row_numel for p in params)], dtype=reduce_dtype)
        sends, outs, offset = [], [], 0
        for g, p in zip(grads, params):
            size = p.padded_rows * p.row_numel
            sends.append(_padded(g.reshape([-1]).to(reduce_dtype), n * size))
            outs.append(out.narrow(0, offset, size))
            offset += size
        group = self.mesh.get_group(self.shard_dim)
        if self.divide_factor is None:
            _redistribute.communicate("reduce_scatter", dist.reduce_scatter_tensor_coalesced, outs, sends,
                                      op=dist.ReduceOp.AVG, group=group)
        else:
            _redistribute.communicate("reduce_scatter", dist.reduce_scatter_tensor_coalesced, outs, sends,
                                      group=group)
            out = out / self.divide_factor
        if self.mesh.ndim > 1:  # HSDP: the replicas of each shard average too
            out = out.contiguous()
            _redistribute.communicate("all_reduce", dist.all_reduce, out, op=dist.ReduceOp.AVG,
                                      group=self.mesh.get_group(0))
        me = self.mesh.get_local_rank(self.shard_dim)
        local, offset = [], 0
        for p in params:
            size = p.padded_rows * p.row_numel
            piece = out.narrow(0, offset, p.rows[me] * p.row_numel)
            local.append(piece.reshape([p.rows[me]] + list(p.shape[1:])).to(p.shard.dtype))
            offset += size
        return local


def _padded(flat, numel):
    """flat (1-D) followed by zeros up to numel elements."""
    pad = numel - flat.shape[0]
    return flat if pad == 0 else _C.cat([flat, _C.zeros([pad], dtype=flat.dtype, device=flat.device)], 0)


def _no_grad():
    from trainrun._autograd import no_grad
    return no_grad()


class _GatherParams(Function):
    """Forward: the full parameters from the shards (one all-gather); backward: their gradients reduced to
    each rank's shard (one reduce-scatter, the mean over ranks)."""

    @staticmethod
    def forward(ctx, group, *shards):
        params = [p for p in group.params if p.shard.requires_grad]
        ctx.group, ctx.params = group, params
        fulls = group._gather(list(shards), params)
        return tuple(fulls) if len(fulls) > 1 else fulls[0]

    @staticmethod
    def backward(ctx, *grads):
        shard_grads = tuple(ctx.group.reduce(list(grads), ctx.params))
        if ctx.group.reshard_after_forward and ctx.group.gathers:  # done with the full parameters: free them again
            ctx.group.free_gathered(trainable_only=True)
        return (None,) + shard_grads


class RegatherBeforeBackward(Function):
    """Identity on a module's outputs; its backward (which autograd runs before the module's own backward
    nodes) gathers the module's freed parameters again."""

    @staticmethod
    def forward(ctx, group, *outputs):
        ctx.group = group
        views = tuple(o.view(o.shape) for o in outputs)
        return views if len(views) > 1 else views[0]

    @staticmethod
    def backward(ctx, *grads):
        ctx.group.regather()
        return (None,) + grads
