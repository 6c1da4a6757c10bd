"""PipelineStage: one stage of a pipeline, on one rank of its group: stage
s runs on group rank s % group size (one stage per rank, or several looped
over the ranks for the interleaved schedules), or in a V (rank r holds
stages r and 2R - 1 - r: ScheduleZBVZeroBubble). It runs its module's
forward and backward per microbatch (the backward whole, or split into the
input's gradient and, later, the weights': zero bubble) and exchanges
activations (forward) and their gradients (backward) with its neighbours by
point-to-point operations, or in memory when the neighbour is on the same
rank. Each send is one header message (the count, dtype and shape of its
tensors), then the tensors, so the receiving stage allocates exactly what
comes, and a shape that changes between steps needs no renegotiation.
Each channel (activations into stage s, gradients into stage s) has its
own tag, so stages sharing a pair of ranks never read each other's
messages. A stage's submodule is usually an nn.Module; a plain callable
works too (nothing of it is sharded or counted in clip_grad_norm_)."""
import trainrun
from trainrun import _C
from trainrun import distributed as dist

_DTYPES = [_C.dtype.float32, _C.dtype.float64, _C.dtype.float16, _C.dtype.bfloat16, _C.dtype.int64,
           _C.dtype.int32, _C.dtype.int8, _C.dtype.uint8, _C.dtype.bool, _C.dtype.int16]  # (appended: indices are sent)
_MAX_TENSORS, _MAX_DIMS = 8, 8
_ENTRY = 2 + _MAX_DIMS  # per tensor: dtype index, ndim, sizes
_HEADER = 1 + _MAX_TENSORS * _ENTRY  # one message describes all of a send's tensors: count, then the entries
_LOCAL = {}  # (group, channel) -> tensors a stage sent to another stage of the same rank, oldest first


_NORM_REDUCERS = {}  # the pipeline group's id -> its reducer of gradient norms (one per group: one collective)


def _norm_reducer(group):
    """How clip_grad_norm_ adds up (or maxes) a norm over the pipeline's ranks: each holds other parameters."""
    reduce = _NORM_REDUCERS.get(id(group))
    if reduce is None:
        def reduce(t, how):
            dist.all_reduce(t, op=dist.ReduceOp.SUM if how == "sum" else dist.ReduceOp.MAX, group=group)
            return t
        _NORM_REDUCERS[id(group)] = reduce
    return reduce


class PipelineStage:
    def __init__(self, submodule, stage_index, num_stages, device=None, input_args=None, output_args=None,
                 group=None, dw_builder=None):
        if not 0 <= stage_index < num_stages:
            raise ValueError(f"PipelineStage: stage_index {stage_index} is not in [0, {num_stages})")
        from trainrun.distributed.pipelining.schedules import loop_rank
        from trainrun.distributed.pipelining.zero_bubble import v_rank
        size = dist.get_world_size(group)
        if num_stages % size:
            raise ValueError(f"PipelineStage: {num_stages} stages do not spread evenly over the group's {size} "
                             "ranks (one stage per rank, or the same number on each)")
        me = dist.get_rank(group)
        layouts = [f for f in (loop_rank, v_rank) if f(stage_index, size) == me and (f is loop_rank or
                                                                                      num_stages == 2 * size)]
        if not layouts:
            raise ValueError(f"PipelineStage: stage {stage_index} runs on group rank {stage_index % size} (stages "
                             f"loop over the ranks) or, in a V of 2 stages per rank, on {v_rank(stage_index, size)}; "
                             f"this is rank {me}")
        self.submod, self.stage_index, self.num_stages, self.device = submodule, stage_index, num_stages, device
        self.group, self.group_size, self.group_rank = group, size, me
        self.is_first, self.is_last = stage_index == 0, stage_index == num_stages - 1
        self._use_layout(layouts[0])
        self._pending_sends = []
        self.clear()
        from trainrun.nn import utils as nn_utils
        nn_utils.register_pipeline_stage(submodule, _norm_reducer(group))

    def _use_layout(self, stage_rank):
        """Where the neighbours are: stage_rank(stage, group size) is the group rank holding a stage."""
        ranks = dist.get_process_group_ranks(self.group)
        s, size = self.stage_index, self.group_size
        self.prev_rank = ranks[stage_rank(s - 1, size)] if s > 0 else None
        self.next_rank = ranks[stage_rank(s + 1, size)] if s < self.num_stages - 1 else None

    def clear(self):
        """Forgets the microbatches of the last step."""
        self.inputs, self.outputs, self.losses, self.received_grads = {}, {}, {}, {}
        self.input_grads, self.weight_passes = {}, {}

    # ---- point to point ---------------------------------------------------------------------------
    def _peer(self, global_rank):
        return global_rank if self.group is None else dist.get_group_rank(self.group, global_rank)

    @staticmethod
    def _tag(stage, backward):
        """The channel of activations (backward: gradients) going into `stage`."""
        return 2 * stage + (1 if backward else 0)

    def _is_me(self, global_rank):
        return self._peer(global_rank) == self.group_rank

    def _send(self, tensors, to, tag):
        if self._is_me(to):  # the neighbour is on this rank: a copy, as the wire would give it
            _LOCAL.setdefault((id(self.group), tag), []).append([t.detach().clone() for t in tensors])
            return
        if len(tensors) > _MAX_TENSORS:
            raise ValueError(f"stage {self.stage_index}: a stage sends at most {_MAX_TENSORS} tensors at once, "
                             f"got {len(tensors)}")
        sent = [t.detach().contiguous() for t in tensors]
        values = [0] * _HEADER
        values[0] = len(sent)
        for k, t in enumerate(sent):
            if t.ndim > _MAX_DIMS:
                raise ValueError(f"stage {self.stage_index}: tensors of more than {_MAX_DIMS} dims cannot be sent")
            base = 1 + k * _ENTRY
            values[base:base + 2 + t.ndim] = [_DTYPES.index(t.dtype), t.ndim, *t.shape]
        header = trainrun.tensor(values, dtype=_C.dtype.int64, device=self.device)
        works = [dist.isend(header, group=self.group, tag=tag, group_dst=self._peer(to))]
        works += [dist.isend(t, group=self.group, tag=tag, group_dst=self._peer(to)) for t in sent]
        self._pending_sends.append((works, sent + [header]))  # buffers stay alive until the sends finish
        self._release_sent()

    def _release_sent(self):
        """Lets go of the buffers of sends that finished (wait() raises if one failed), so a microbatch's
        activations are freed when its backward is done, not at the end of the step: 1F1B's memory bound."""
        pending = []
        for entry in self._pending_sends:
            if all(w.is_completed() for w in entry[0]):
                for w in entry[0]:
                    w.wait()
            else:
                pending.append(entry)
        self._pending_sends = pending

    def _recv(self, frm, tag):
        if self._is_me(frm):
            waiting = _LOCAL.get((id(self.group), tag))
            if not waiting:
                raise RuntimeError(f"stage {self.stage_index}: nothing was sent on channel {tag} by this rank's other "
                                   "stage (the schedule receives before it sends)")
            return waiting.pop(0)
        header = _C.empty([_HEADER], dtype=_C.dtype.int64, device=self.device)  # (NCCL sends device memory)
        dist.recv(header, group=self.group, tag=tag, group_src=self._peer(frm))
        values, out = header.tolist(), []
        for k in range(values[0]):
            base = 1 + k * _ENTRY
            ndim = values[base + 1]
            t = _C.empty(values[base + 2:base + 2 + ndim], dtype=_DTYPES[values[base]], device=self.device)
            dist.recv(t, group=self.group, tag=tag, group_src=self._peer(frm))
            out.append(t)
        return out

    def wait_sends(self):
        for works, _ in self._pending_sends:
            for w in works:
                w.wait()
        self._pending_sends = []

    # ---- the actions ------------------------------------------------------------------------------
    def recv_forward(self, m):
        received = self._recv(self.prev_rank, self._tag(self.stage_index, backward=False))
        for t in received:
            if t.is_floating_point():
                t.requires_grad_(True)
        self.inputs[m] = (tuple(received), {})

    def forward(self, m, args=None, kwargs=None):
        if self.is_first:
            self.inputs[m] = (tuple(args), dict(kwargs or {}))
        a, k = self.inputs[m]
        out = self.submod(*a, **k)
        self.outputs[m] = out
        return out

    def send_forward(self, m):
        out = self.outputs[m]
        self._send(list(out) if isinstance(out, (tuple, list)) else [out], self.next_rank,
                   self._tag(self.stage_index + 1, backward=False))

    def recv_backward(self, m):
        self.received_grads[m] = self._recv(self.next_rank, self._tag(self.stage_index, backward=True))

    def backward(self, m, loss=None, weights=True):
        """The microbatch's backward from the loss (last stage) or the received gradients. weights=False does
        only the input's gradient (I, for send_backward) and keeps the graph for backward_weight (W)."""
        out = self.outputs.pop(m)
        # Sends that finished let go of their buffers; none is waited for here: the process group runs its
        # operations in order, so waiting on one send can wait on a send the peer will only take later.
        self._release_sent()
        if self.is_last:
            roots, grads = [loss], []
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            pairs = [(o, g) for o, g in zip(outs, self.received_grads.pop(m)) if o.requires_grad]
            roots, grads = [o for o, _ in pairs], [g for _, g in pairs]
        if weights:
            _C._backward_roots(roots, grads or [None] * len(roots))
            return
        args, _ = self.inputs[m]
        wanted = [a for a in args if _C._is_cpp_tensor(a) and a.requires_grad]
        got, self.weight_passes[m] = _C._backward_inputs(roots, wanted, grads)
        self.input_grads[m] = {id(a): g for a, g in zip(wanted, got)}

    def backward_weight(self, m):
        """The weights' gradients of microbatch m (its backward(weights=False) ran before)."""
        self.weight_passes.pop(m).run()

    def send_backward(self, m):
        args, _ = self.inputs.pop(m)
        computed = self.input_grads.pop(m, None)
        grads = []
        for a in args:
            if _C._is_cpp_tensor(a) and a.is_floating_point():
                g = computed.get(id(a)) if computed is not None else a.grad
                grads.append(g if g is not None else _C.zeros(list(a.shape), dtype=a.dtype, device=a.device))
        self._send(grads, self.prev_rank, self._tag(self.stage_index - 1, backward=True))
