"""One fully_shard call's parameters: sharded along dim 0 over the mesh
(torch.chunk's pieces), gathered for forward with one all-gather over
per-parameter buffers, and their gradients reduced with one reduce-scatter
(the mean over the ranks) into the shards' .grad.

Every collective is issued with async_op=True: the process group's own
thread runs it while this thread computes, and the group waits for it only
when it needs the result (_schedule.py decides when each is issued).

The gathered parameters are outputs of an autograd Function whose backward
issues that reduce-scatter, so autograd tells the group when its gradients
are complete; between forwards the module's registry holds the shards (what
optimizers and state_dict see).

reshard_after_forward: after the module's forward, the memory of the
gathered parameters is freed (their storages resized to 0, though autograd
still holds the tensors), and an identity Function on the module's outputs
gathers them again into the same storages when backward reaches the module.
With an int k, each rank first keeps its 1/k of every gathered buffer, and
backward gathers again over the k consecutive ranks only (within a host)."""
import weakref

import numpy as np

from trainrun import _C
from trainrun import distributed as dist
from trainrun.autograd import Function
from trainrun.distributed.fsdp._fsdp_param import padded
from trainrun.nn import utils as nn_utils
from trainrun.profiler import record_function
from trainrun.distributed.tensor import _redistribute
from trainrun.distributed.tensor._dtensor import DTensor, DTensorSpec
from trainrun.distributed.tensor._module_views import set_view
from trainrun.distributed.tensor.placement_types import Replicate, Shard, _StridedShard


class _Collective:
    """A collective issued with async_op=True, with the tensors it reads kept alive until it is waited for."""

    def __init__(self, work, *keep_alive):
        self.work, self.keep_alive = work, keep_alive

    def wait(self):
        if self.work is not None:
            self.work.wait()
            self.work, self.keep_alive = None, ()


class _Gather(_Collective):
    """The parameters gathered for one forward: one buffer per parameter (the ranks' padded shards, rank-major),
    in dtype. Each forward's gather has its own state between forward and backward (freed, what this rank
    kept, a re-gather in flight): several forwards may wait for their backwards at once (pipeline microbatches,
    two losses summed), each backward gathering its own forward's buffers again."""

    def __init__(self, params, dtype, outs, work, sends):
        super().__init__(work, sends)
        self.params, self.dtype, self.outs = params, dtype, outs
        self.forward_id = None  # the root forward that computed with it (_schedule: which re-gather to prefetch)
        self.freed = False  # its storages released after forward, until backward gathers them again
        self.kept = None  # reshard_after_forward=k: this rank's 1/k of each buffer while freed
        self.regathering = None  # a backward re-gather in flight


class _Reduce(_Collective):
    """A reduce-scatter of the group's gradients: out is flat, each parameter's shard at its offset."""

    def __init__(self, group, out, work, sends):
        super().__init__(work, sends)
        self.group, self.out = group, out


class _Regather(_Collective):
    """A gather into buffers autograd saved: the writes do not count as in-place modifications (the tensors
    get their own values back), so each buffer's version is put back once the copy into it is done."""

    def __init__(self, work, sends, outs, versions):
        super().__init__(work, sends)
        self.outs, self.versions = outs, versions

    def wait(self):
        if self.work is not None:
            super().wait()
            for o, v in zip(self.outs, self.versions):
                _C._unsafe_set_version(o, v)


class ParamGroup:
    def __init__(self, params, mesh, mp_policy, reshard_after_forward=True):
        self.params, self.mesh, self.mp_policy = params, mesh, mp_policy
        self.trainable = [p for p in params if p.requires_grad]
        self.shard_dim = mesh.ndim - 1  # the last mesh dim shards; a leading one replicates (HSDP)
        self.shard_size = mesh.size(self.shard_dim)
        self.post_forward_size = post_forward_size(reshard_after_forward, self.shard_size)
        self.post_forward_group = self.post_forward_index = None
        if self.post_forward_size not in (None, 1):
            self.post_forward_group, self.post_forward_index = _post_forward_group(mesh, self.post_forward_size)
        self.prefetched = None  # a _Gather issued ahead of the forward that will use it
        self.gathered = None  # the _Gather the current forward computes with
        self.installed = False  # the gathered parameters are in the modules' slots
        # _Gathers freed after their forward, waiting for their backward; weakly, as the graph holds them: a
        # forward whose graph is dropped without a backward leaves nothing behind.
        self.freed_records = []
        self.reshard_after_backward = True
        self.unshard_in_backward = True  # False: backward reads none of these parameters (set_unshard_in_backward)
        self.sync_gradients = True
        self.all_reduce_replicas = True  # HSDP: average each shard's gradient over the replicas (dim 0)
        self.pending = None  # unsharded gradients held back while sync is off
        self.divide_factor = None
        self.forward_prefetch = self.backward_prefetch = None  # groups named by set_modules_to_*_prefetch
        self.root = None  # the root group of the last forward that ran this one (its order drives prefetching)
        for p in params:  # module.weight shows the DTensor over the shard
            for module, name in p.slots:
                set_view(module, name, self.dtensor(p))
            # clip_grad_norm_ adds the shards' norms over the shard dim (replicas hold the same shard)
            nn_utils.register_sharded_parameter(p.shard, self.norm_reducer(p))

    def replace_shards(self, replaced):
        """to_empty or load_state_dict(assign=True) made new tensors for the shards (old tensor's _cdata -> new):
        every slot and view takes them (the caller moved their clip_grad_norm_ registration)."""
        for p in self.params:
            new = replaced.get(p.shard._cdata)
            if new is None:
                continue
            p.replace_shard(new)
            for module, name in p.slots:
                set_view(module, name, self.dtensor(p))

    @property
    def reshard_after_forward(self):
        return self.post_forward_size is not None

    # ---- layout ---------------------------------------------------------------------------------
    def local_spec(self, p):
        """The DTensor layout of p's shard: Shard(0) over the shard dim (Replicate over HSDP's replicate dim);
        for a tensor-parallel parameter, on the mesh joining this one and the TP mesh, with the TP placements
        after ours (a strided shard where TP also splits dim 0: our rows are a block of the TP piece)."""
        placements = [Replicate()] * (self.mesh.ndim - 1) + [Shard(p.dim)]
        if p.outer is None:
            return DTensorSpec(self.mesh, placements, p.shape)
        tp = p.outer
        if any(q.is_shard(p.dim) for q in tp.placements):
            split = int(np.prod([tp.mesh.size(i) for i, q in enumerate(tp.placements) if q.is_shard(p.dim)]))
            placements[-1] = _StridedShard(p.dim, split_factor=split)
        return DTensorSpec(_joined_mesh(self.mesh, tp.mesh), placements + list(tp.placements), tp.shape)

    def norm_reducer(self, p):
        """What clip_grad_norm_ combines p's shard norms with: over the shard dim (replicas hold the same
        shard), then over the TP mesh dims that split p."""
        over_shards = _redistribute.reducer_over(self.mesh, self.shard_dim)
        if p.outer is None:
            return over_shards
        tp = p.outer
        over_tp = [_redistribute.reducer_over(tp.mesh, i) for i, q in enumerate(tp.placements) if q.is_shard()]

        def reduce(t, how):
            t = over_shards(t, how)
            for r in over_tp:
                t = r(t, how)
            return t
        return reduce

    def dtensor(self, p):
        return DTensor(p.shard, self.local_spec(p))

    def _communicate(self, kind, fn, *args, group=None, **kwargs):
        group = self.mesh._group(self.shard_dim) if group is None else group
        return _redistribute.communicate(kind, fn, *args, group=group, async_op=True, **kwargs)

    # ---- forward: gather ----------------------------------------------------------------------------
    @record_function("FSDP::all_gather")
    def start_unshard(self):
        """Issues the all-gather of the shards (it runs on the process group's thread), unless one is already
        issued or the parameters are in place."""
        if self.prefetched is None and not self.installed and self.params:
            dtype = self.mp_policy.param_dtype or self.params[0].shard.dtype
            sends = [p.send_buffer(dtype) for p in self.params]
            outs = [_C.empty([self.shard_size * p.padded_numel], dtype=dtype, device=p.shard.device)
                    for p in self.params]
            work = self._communicate("all_gather", dist.all_gather_into_tensor_coalesced, outs, sends)
            self.prefetched = _Gather(self.params, dtype, outs, work, sends)

    def unshard(self):
        """Waits for the all-gather (issuing it if no prefetch did) and puts the full parameters in the modules'
        slots: the trainable ones as outputs of _GatherParams, whose backward reduce-scatters their gradients."""
        if self.installed or not self.params:
            return
        self.start_unshard()
        record, self.prefetched = self.prefetched, None
        record.wait()
        record.forward_id = self.root.forward_id if self.root is not None else None
        self.gathered = record
        fulls = [p.full_view(o, self.shard_size) for p, o in zip(record.params, record.outs)]
        trainable = [i for i, p in enumerate(self.params) if p.requires_grad]
        if trainable:
            # The views go in a one-shot holder that forward empties: Function keeps its arguments for backward,
            # and the views, whose history is that node, would make a cycle through C++ no collector can see.
            attached = _GatherParams.apply(self, record, [[fulls[i] for i in trainable]],
                                           *[self.params[i].shard for i in trainable])
            attached = attached if isinstance(attached, tuple) else (attached,)
            for i, full in zip(trainable, attached):
                fulls[i] = full
        for p, full in zip(self.params, fulls):
            p.install(full, True)
        self.installed = True

    def reshard(self):
        for p in self.params:
            p.install(p.shard, False)
        self.installed = False

    def drop_prefetch(self):
        """A gather issued for a forward that did not run this group: waited for and let go, so that no later
        forward computes with parameters gathered before an optimizer step."""
        if self.prefetched is not None:
            self.prefetched.wait()
            self.prefetched = None

    # ---- between forward and backward ---------------------------------------------------------------
    def free_after_forward(self):
        """Gives back the memory of the current forward's gathered parameters (autograd keeps the tensors); with
        reshard_after_forward=k, keeps this rank's 1/k of each first."""
        record = self.gathered
        if record is None or record.freed:
            return
        if self.post_forward_group is not None:
            k, i = self.post_forward_size, self.post_forward_index
            record.kept = [o.narrow(0, i * (o.numel() // k), o.numel() // k).clone() for o in record.outs]
        for o in record.outs:
            o.untyped_storage().resize_(0)
        record.freed = True
        self.freed_records.append(weakref.ref(record))

    def waiting_record(self, forward_id):
        """The freed gather of root forward forward_id, if its backward has not gathered it again."""
        self.freed_records = [ref for ref in self.freed_records if ref() is not None and ref().freed]
        return next((ref() for ref in self.freed_records if ref().forward_id == forward_id), None)

    def start_regather(self, record):
        """Issues the gather into a freed record's storages (before backward reads them)."""
        if record is None or not record.freed or record.regathering is not None:
            return
        versions = [o._version for o in record.outs]  # before the backend's thread can write
        for o in record.outs:
            o.untyped_storage().resize_(o.numel() * o.element_size())
        if record.kept is not None:  # the k ranks' parts make up the buffer
            sends = record.kept
            work = self._communicate("all_gather", dist.all_gather_into_tensor_coalesced, record.outs, sends,
                                     group=self.post_forward_group)
        else:
            sends = [p.send_buffer(record.dtype) for p in record.params]
            work = self._communicate("all_gather", dist.all_gather_into_tensor_coalesced, record.outs, sends)
        record.regathering = _Regather(work, sends, record.outs, versions)

    def regather(self, record):
        if record is None or not record.freed:
            return
        self.start_regather(record)
        record.regathering.wait()
        record.regathering, record.freed, record.kept = None, False, None
        self.freed_records = [ref for ref in self.freed_records if ref() is not None and ref() is not record]

    def free_after_backward(self, record):
        """The reduce-scatter of record's forward is issued: nothing reads its trainable gathered parameters any
        more. Frozen ones may still be read by backward nodes that run later: only let go (autograd frees them
        with the graph)."""
        if record is self.gathered:
            self.gathered = None
        if record is None:
            return
        if not self.reshard_after_backward and not record.freed:  # kept for the next forward: it gathers nothing
            if self.prefetched is None and not self.installed:
                self.prefetched = record
            return
        if self.reshard_after_forward:
            for p, o in zip(record.params, record.outs):
                if p.requires_grad:
                    o.untyped_storage().resize_(0)

    # ---- backward: reduce-scatter ----------------------------------------------------------------
    @record_function("FSDP::post_backward_reduce")
    def start_reduce(self, grads):
        """Issues the reduce-scatter of the trainable parameters' full gradients (the mean over the shard
        ranks); returns it, to finish later, or None while gradient sync is off (the full gradients are summed
        locally until a backward with sync)."""
        params = self.trainable
        grads = [g if g is not None else _C.zeros(list(p.shape), dtype=p.shard.dtype, device=p.shard.device)
                 for g, p in zip(grads, params)]
        grads = [g if p.gradient_sum_group is None else _redistribute.all_reduced(g, p.gradient_sum_group)
                 for g, p in zip(grads, params)]
        if self.pending is not None:
            grads = [g + h for g, h in zip(grads, self.pending)]
            self.pending = None
        if not self.sync_gradients:
            self.pending = [g.detach().clone() for g in grads]
            return None
        reduce_dtype = self.mp_policy.reduce_dtype or params[0].shard.dtype
        # Chunk r of each padded gradient is rank r's rows (torch.chunk's, padding after the last); the outputs
        # are views of one flat buffer, so that HSDP's average over replicas is one all-reduce.
        out = _C.empty([sum(p.padded_numel for p in params)], dtype=reduce_dtype, device=params[0].shard.device)
        sends, outs, offset = [], [], 0
        for g, p in zip(grads, params):
            sends.append(padded(p.rows_first(g).to(reduce_dtype), self.shard_size * p.padded_numel))
            outs.append(out.narrow(0, offset, p.padded_numel))
            offset += p.padded_numel
        op = dist.ReduceOp.AVG if self.divide_factor is None else dist.ReduceOp.SUM
        work = self._communicate("reduce_scatter", dist.reduce_scatter_tensor_coalesced, outs, sends, op=op)
        return _Reduce(self, out, work, sends)

    def finish_reduce(self, reduce):
        """Waits for the reduce-scatter and adds each shard's gradient to its .grad (HSDP: after averaging
        over the replicas)."""
        reduce.wait()
        out = reduce.out
        if self.divide_factor is not None:
            out = out / self.divide_factor
        if self.mesh.ndim > 1 and self.all_reduce_replicas:  # HSDP: the replicas of each shard average too
            out = out.contiguous()
            _redistribute.communicate("all_reduce", dist.all_reduce, out, op=dist.ReduceOp.AVG,
                                      group=self.mesh._group(0))
        me = self.mesh.get_local_rank(self.shard_dim)
        offset = 0
        with _no_grad():
            for p in self.trainable:
                piece = p.from_rows(out.narrow(0, offset, p.rows[me] * p.row_numel), p.rows[me]).to(p.shard.dtype)
                if p.shard.grad is None:
                    p.shard.grad = piece
                else:
                    p.shard.grad.add_(piece)
                offset += p.padded_numel


def post_forward_size(reshard_after_forward, shard_size):
    """How many ranks hold the parameters between forward and backward: None (each rank keeps them whole),
    shard_size (the shards only), or k for reshard_after_forward=k (PyTorch's rule: 1 means False, the shard
    size means True)."""
    if reshard_after_forward is True:
        return shard_size
    if reshard_after_forward is False:
        return None
    if not isinstance(reshard_after_forward, int) or reshard_after_forward < 1 or \
            shard_size % reshard_after_forward:
        raise ValueError(f"fully_shard: reshard_after_forward must be True, False or a factor of the shard "
                         f"dim's size {shard_size}, got {reshard_after_forward!r}")
    return None if reshard_after_forward == 1 else reshard_after_forward


def _post_forward_group(mesh, k):
    """The process group of this rank's k consecutive ranks along the shard dim, and this rank's index in it.
    Every rank creates every such group, in the same order."""
    from trainrun.distributed import device_mesh
    ranks = np.asarray(mesh.mesh.tolist() if hasattr(mesh.mesh, "tolist") else mesh.mesh, dtype=np.int64)
    split = ranks.reshape(ranks.shape[:-1] + (ranks.shape[-1] // k, k))
    device_mesh._create_groups(split, [split.ndim - 1])
    where = tuple(int(c) for c in np.argwhere(split == dist.get_rank())[0])
    return device_mesh._group_for(split[where[:-1]]), where[-1]


def _joined_mesh(fsdp_mesh, tp_mesh):
    """The mesh of fsdp_mesh's dims followed by tp_mesh's (both sliced from init_device_mesh's mesh by name)."""
    from trainrun.distributed import device_mesh
    root = device_mesh._ROOT.get("mesh")
    names = tuple(fsdp_mesh.mesh_dim_names or ()) + tuple(tp_mesh.mesh_dim_names or ())
    root_names = tuple(root.mesh_dim_names or ()) if root is not None else ()
    if len(names) != fsdp_mesh.ndim + tp_mesh.ndim or any(n not in root_names for n in names) or \
            [root_names.index(n) for n in names] != sorted(root_names.index(n) for n in names):
        raise ValueError(f"fully_shard over a tensor-parallel parameter: the FSDP mesh {fsdp_mesh} and the TP mesh "
                         f"{tp_mesh} must be named dims of one init_device_mesh mesh, FSDP's first "
                         f"(e.g. mesh['dp'] and mesh['tp'])")
    return root[names]


def _no_grad():
    from trainrun._autograd import no_grad
    return no_grad()


class _GatherParams(Function):
    """Forward: the full parameters (views of the gathered buffers) as functions of the shards; backward: their
    gradients reduce-scattered to each rank's shard (issued here, finished by _schedule: the shards' .grad is
    set then, so the shards get no gradient from autograd itself)."""

    @staticmethod
    def forward(ctx, group, record, holder, *shards):
        ctx.group, ctx.record = group, record
        fulls = holder.pop()
        return tuple(fulls) if len(fulls) > 1 else fulls[0]

    @staticmethod
    def backward(ctx, *grads):
        from trainrun.distributed.fsdp import _schedule
        group = ctx.group
        _schedule.reduce_issued(group.start_reduce(list(grads)))
        group.free_after_backward(ctx.record)
        return (None, None, None) + (None,) * len(grads)


class RegatherBeforeBackward(Function):
    """Identity on a module's outputs; its backward (which autograd runs before the module's own backward
    nodes) gathers the module's freed parameters again, and issues the gather of the group backward reaches
    next."""

    @staticmethod
    def forward(ctx, group, *outputs):
        ctx.group, ctx.record = group, group.gathered  # this forward's gather (later forwards make their own)
        views = tuple(o.view(o.shape) for o in outputs)
        return views if len(views) > 1 else views[0]

    @staticmethod
    def backward(ctx, *grads):
        from trainrun.distributed.fsdp import _schedule
        if ctx.group.unshard_in_backward:
            ctx.group.regather(ctx.record)
        _schedule.prefetch_backward(ctx.group, ctx.record)
        return (None,) + grads
