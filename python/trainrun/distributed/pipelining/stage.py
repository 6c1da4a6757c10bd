"""PipelineStage: one stage of a pipeline, on one rank of its group: stage
s runs on group rank s % group size (one stage per rank, or several looped
over the ranks for the interleaved schedules). It runs its module's forward and backward per
microbatch and exchanges activations (forward) and their gradients
(backward) with its neighbours by point-to-point operations. Each tensor
travels with a small header (dtype and shape), so the receiving stage
allocates exactly what comes, and a shape that changes between steps
needs no renegotiation. Each channel (activations into stage s, gradients
into stage s) has its own tag, so stages sharing a pair of ranks never
read each other's messages."""
from trainrun import _C
from trainrun import distributed as dist

_DTYPES = [_C.dtype.float32, _C.dtype.float64, _C.dtype.float16, _C.dtype.bfloat16, _C.dtype.int64,
           _C.dtype.int32, _C.dtype.int8, _C.dtype.uint8, _C.dtype.bool]
_HEADER = 10  # count or (dtype index, ndim, up to 8 sizes)


class PipelineStage:
    def __init__(self, submodule, stage_index, num_stages, device=None, input_args=None, output_args=None,
                 group=None, dw_builder=None):
        if not 0 <= stage_index < num_stages:
            raise ValueError(f"PipelineStage: stage_index {stage_index} is not in [0, {num_stages})")
        size = dist.get_world_size(group)
        if num_stages % size:
            raise ValueError(f"PipelineStage: {num_stages} stages do not spread evenly over the group's {size} "
                             "ranks (one stage per rank, or the same number on each)")
        if dist.get_rank(group) != stage_index % size:
            raise ValueError(f"PipelineStage: stage {stage_index} runs on group rank {stage_index % size} (stages "
                             f"loop over the ranks), this is rank {dist.get_rank(group)}")
        self.submod, self.stage_index, self.num_stages, self.device = submodule, stage_index, num_stages, device
        self.group = group
        ranks = dist.get_process_group_ranks(group)
        self.prev_rank = ranks[(stage_index - 1) % size] if stage_index > 0 else None
        self.next_rank = ranks[(stage_index + 1) % size] if stage_index < num_stages - 1 else None
        self.is_first, self.is_last = stage_index == 0, stage_index == num_stages - 1
        self._pending_sends = []
        self.clear()

    def clear(self):
        """Forgets the microbatches of the last step."""
        self.inputs, self.outputs, self.losses, self.received_grads = {}, {}, {}, {}

    # ---- point to point ---------------------------------------------------------------------------
    def _peer(self, global_rank):
        return global_rank if self.group is None else dist.get_group_rank(self.group, global_rank)

    @staticmethod
    def _tag(stage, backward):
        """The channel of activations (backward: gradients) going into `stage`."""
        return 2 * stage + (1 if backward else 0)

    def _send(self, tensors, to, tag):
        header = _C.zeros([_HEADER], dtype=_C.dtype.int64)
        header[0] = len(tensors)
        works, sent = [dist.isend(header, self._peer(to), group=self.group, tag=tag)], []
        for t in tensors:
            t = t.detach().contiguous()
            sent.append(t)
            if t.ndim > _HEADER - 2:
                raise ValueError(f"stage {self.stage_index}: tensors of more than {_HEADER - 2} dims cannot be sent")
            h = _C.zeros([_HEADER], dtype=_C.dtype.int64)
            h[0], h[1] = _DTYPES.index(t.dtype), t.ndim
            for k, s in enumerate(t.shape):
                h[2 + k] = s
            works.append(dist.isend(h, self._peer(to), group=self.group, tag=tag))
            works.append(dist.isend(t, self._peer(to), group=self.group, tag=tag))
            sent.append(h)
        self._pending_sends.append((works, sent, header))  # buffers stay alive until the sends finish

    def _recv(self, frm, tag):
        header = _C.zeros([_HEADER], dtype=_C.dtype.int64)
        dist.recv(header, self._peer(frm), group=self.group, tag=tag)
        out = []
        for _ in range(int(header[0].item())):
            h = _C.zeros([_HEADER], dtype=_C.dtype.int64)
            dist.recv(h, self._peer(frm), group=self.group, tag=tag)
            values = h.tolist()
            dtype, ndim = _DTYPES[values[0]], values[1]
            t = _C.empty(values[2:2 + ndim], dtype=dtype)
            dist.recv(t, self._peer(frm), group=self.group, tag=tag)
            out.append(t)
        return out

    def wait_sends(self):
        for works, _, _ in self._pending_sends:
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

    def backward(self, m, loss=None):
        out = self.outputs.pop(m)
        if self.is_last:
            loss.backward()
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            grads = self.received_grads.pop(m)
            pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
            for k, (o, g) in enumerate(pairs):
                o.backward(g, retain_graph=k < len(pairs) - 1)

    def send_backward(self, m):
        args, _ = self.inputs.pop(m)
        grads = [a.grad if a.grad is not None else _C.zeros(list(a.shape), dtype=a.dtype)
                 for a in args if isinstance(a, _C.Tensor) and a.is_floating_point()]
        self._send(grads, self.prev_rank, self._tag(self.stage_index - 1, backward=True))
