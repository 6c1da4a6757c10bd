"""Pipeline schedules as data. A schedule is, per rank, a list of actions
(stage, computation, microbatch), printed as PyTorch prints them ("2F0",
"1B3"): the compute order (F forward, B backward, or B split into I, the
input's gradient, and W, the weights': zero_bubble.py) comes from the
schedule's rule, and lowering adds the communication (RECV_F before a
forward that needs its input, SEND_F after it; RECV_B/SEND_B around B or I). The executor
runs the lowered list: sends are non-blocking and complete by the end of
the step, receives wait (with the group's timeout), so a list whose sends
and receives pair up in the same order on each channel cannot hang."""
import collections
import time

from trainrun.distributed.pipelining.microbatch import merge_chunks, split_args_kwargs_into_chunks

F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B = "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B"
UNSHARD, RESHARD = "UNSHARD", "RESHARD"  # a fully_shard stage's gather issued ahead, its parameters let go


class _ComputationType(str, __import__("enum").Enum):
    """PyTorch's names for the computations; each is its letter, so `_Action(0, FORWARD, 1)` is the action "0F1"."""
    FORWARD = F
    FULL_BACKWARD = B
    BACKWARD_INPUT = I
    BACKWARD_WEIGHT = W
    UNSHARD = UNSHARD
    RESHARD = RESHARD
    SEND_F = SEND_F
    RECV_F = RECV_F
    SEND_B = SEND_B
    RECV_B = RECV_B

    def __str__(self):
        return self.value

    __format__ = lambda self, spec: format(self.value, spec)  # noqa: E731  (prints as its letter)


FORWARD, FULL_BACKWARD = _ComputationType.FORWARD, _ComputationType.FULL_BACKWARD
BACKWARD_INPUT, BACKWARD_WEIGHT = _ComputationType.BACKWARD_INPUT, _ComputationType.BACKWARD_WEIGHT
BACKWARDS = (B, I)  # what sends the input's gradient to the previous stage
WEIGHT_PASSES = (B, W)  # what computes the weights' gradients


class _Action(collections.namedtuple("_Action", ["stage_index", "computation_type", "microbatch_index"])):
    def __repr__(self):
        m = "" if self.microbatch_index is None else self.microbatch_index
        return f"{self.stage_index}{self.computation_type}{m}"

    @staticmethod
    def from_str(text):
        import re
        m = re.fullmatch(r"(\d+)(?:(UNSHARD|RESHARD)|(SEND_F|RECV_F|SEND_B|RECV_B|F|B|I|W)(\d+))", text.strip())
        if not m:
            raise ValueError(f"not an action: {text!r} (expected e.g. '2F0', '1RECV_B3' or '0UNSHARD')")
        if m.group(2):
            return _Action(int(m.group(1)), m.group(2), None)
        return _Action(int(m.group(1)), m.group(3), int(m.group(4)))


def gpipe_order(stage, num_stages, n_microbatches):
    """All forwards, then all backwards."""
    return [_Action(stage, F, m) for m in range(n_microbatches)] + \
        [_Action(stage, B, m) for m in range(n_microbatches)]


def one_f_one_b_order(stage, num_stages, n_microbatches):
    """Warm-up forwards (num_stages - stage - 1 of them), then one forward and one backward in turn, then the
    remaining backwards: at most num_stages - stage microbatches live on a stage."""
    warmup = min(n_microbatches, num_stages - stage - 1)
    order = [_Action(stage, F, m) for m in range(warmup)]
    forward, backward = warmup, 0
    while forward < n_microbatches:
        order.append(_Action(stage, F, forward))
        forward += 1
        order.append(_Action(stage, B, backward))
        backward += 1
    order += [_Action(stage, B, m) for m in range(backward, n_microbatches)]
    return order


def interleaved_1f1b_order(rank, num_ranks, stages_per_rank, n_microbatches):
    """Megatron's interleaved 1F1B: rank r holds stages r, r + R, ... (R ranks); forwards go through its stages
    in turn, R microbatches at a time, backwards the same with the stages reversed; a warm-up of
    2 (R - r - 1) + (v - 1) R forwards, then one forward and one backward in turn. M must be a multiple of R."""
    R, v, M = num_ranks, stages_per_rank, n_microbatches
    if M % R:
        raise ValueError(f"interleaved 1F1B: {M} microbatches must be a multiple of the {R} ranks")
    total = M * v

    def action(k, kind):
        chunk = (k // R) % v
        return _Action((chunk if kind == F else v - 1 - chunk) * R + rank, kind, (k // (R * v)) * R + k % R)
    warmup = min(total, 2 * (R - rank - 1) + (v - 1) * R)
    order = [action(k, F) for k in range(warmup)]
    forward, backward = warmup, 0
    while forward < total:
        order.append(action(forward, F))
        forward += 1
        order.append(action(backward, B))
        backward += 1
    return order + [action(k, B) for k in range(backward, total)]


def looped_bfs_order(rank, num_ranks, stages_per_rank, n_microbatches):
    """Breadth first: every microbatch through this rank's first stage, then its next, ...; backwards in the
    reverse order."""
    stages = [c * num_ranks + rank for c in range(stages_per_rank)]
    return [_Action(s, F, m) for s in stages for m in range(n_microbatches)] + \
        [_Action(s, B, m) for s in reversed(stages) for m in reversed(range(n_microbatches))]


def lower(order, num_stages, sharded_stages=()):
    """The compute order with its communication: each send paired with the neighbour's receive. Stages in
    sharded_stages (fully_shard modules) get UNSHARD before their first action (their parameters' gather runs
    while the stage waits for its input) and RESHARD after their last weight pass."""
    out, started = [], set()
    last_weight_pass = {a.stage_index: a for a in order if a.computation_type in WEIGHT_PASSES}
    for a in order:
        s = a.stage_index
        if s in sharded_stages and s not in started:
            out.append(_Action(s, UNSHARD, None))
        started.add(s)
        if a.computation_type == F:
            if s > 0:
                out.append(_Action(s, RECV_F, a.microbatch_index))
            out.append(a)
            if s < num_stages - 1:
                out.append(_Action(s, SEND_F, a.microbatch_index))
        elif a.computation_type == W:  # the weights' gradients: nobody waits for them
            out.append(a)
        else:
            if s < num_stages - 1:
                out.append(_Action(s, RECV_B, a.microbatch_index))
            out.append(a)
            if s > 0:
                out.append(_Action(s, SEND_B, a.microbatch_index))
        if s in sharded_stages and last_weight_pass.get(s) is a:
            out.append(_Action(s, RESHARD, None))
    return out


def validate(order, n_microbatches):
    """Refuses a compute order that cannot run: on each stage, every microbatch forwarded once, then
    backwarded once (B, or I then W). Raises ValueError naming the first bad action."""
    stages = sorted({a.stage_index for a in order})
    if len(stages) > 1:
        for s in stages:
            validate([a for a in order if a.stage_index == s], n_microbatches)
        return
    forwarded, backwarded, weighted = set(), set(), set()
    for a in order:
        m, kind = a.microbatch_index, a.computation_type
        if kind == F:
            if m in forwarded:
                raise ValueError(f"action {a!r}: microbatch {m} is forwarded twice")
            forwarded.add(m)
        elif kind in BACKWARDS:
            if m not in forwarded:
                raise ValueError(f"action {a!r}: backward before the forward of microbatch {m}")
            if m in backwarded:
                raise ValueError(f"action {a!r}: microbatch {m} is backwarded twice")
            backwarded.add(m)
            if kind == B:
                weighted.add(m)
        elif kind == W:
            if m not in backwarded or m in weighted:
                raise ValueError(f"action {a!r}: the weight pass of microbatch {m} needs its input pass (I) first, "
                                 "once")
            weighted.add(m)
    missing = set(range(n_microbatches)) - backwarded
    if missing:
        raise ValueError(f"the schedule never runs the backward of microbatches {sorted(missing)}")
    unweighted = backwarded - weighted
    if unweighted:
        raise ValueError(f"the schedule never runs the weight pass (W) of microbatches {sorted(unweighted)}")


def orders_to_csv(orders):
    """Every rank's compute order, one rank per line, actions comma-separated in PyTorch's form ("0F1")."""
    return "".join(",".join(repr(a) for a in order) + "\n" for order in orders)


def loop_rank(stage, num_ranks):
    """The rank that holds `stage` when stages loop over the ranks (stage s on rank s % R)."""
    return stage % num_ranks


def orders_from_csv(text, num_ranks, num_stages, n_microbatches, stage_rank=loop_rank):
    """The compute orders of a CSV (orders_to_csv's form; empty cells are bubbles), checked: one line per rank,
    each action on a stage of its rank (stage_rank(s, R): s % R, or zero_bubble.v_rank for the V layout), every
    stage's microbatches forwarded then backwarded once, and the whole schedule run on paper (simulator) so
    that one that would deadlock is refused naming the stuck actions."""
    rows = [line for line in text.splitlines() if line.strip()]
    if len(rows) != num_ranks:
        raise ValueError(f"schedule CSV: {len(rows)} lines for {num_ranks} ranks (one line per rank)")
    orders = []
    for rank, line in enumerate(rows):
        order = [_Action.from_str(cell) for cell in line.split(",") if cell.strip()]
        for a in order:
            if a.stage_index >= num_stages or stage_rank(a.stage_index, num_ranks) != rank:
                raise ValueError(f"schedule CSV: action {a!r} on line {rank + 1} is for stage {a.stage_index}, "
                                 f"which does not run on rank {rank} ({num_stages} stages over {num_ranks} ranks)")
        for s in (s for s in range(num_stages) if stage_rank(s, num_ranks) == rank):
            try:
                validate([a for a in order if a.stage_index == s], n_microbatches)
            except ValueError as e:
                raise ValueError(f"schedule CSV, rank {rank}, stage {s}: {e}") from None
        orders.append(order)
    # Each channel delivers in order: a stage must take its neighbour's microbatches in the order they were sent.
    def sequence(stage, kind):
        kinds = BACKWARDS if kind == B else (kind,)
        return [a.microbatch_index for a in orders[stage_rank(stage, num_ranks)] if a.stage_index == stage and
                a.computation_type in kinds]
    for s in range(1, num_stages):
        for kind, sender, receiver in ((F, s - 1, s), (B, s, s - 1)):
            if sequence(sender, kind) != sequence(receiver, kind):
                raise ValueError(f"schedule CSV: stage {receiver} runs {kind} of microbatches "
                                 f"{sequence(receiver, kind)} but stage {sender} sends them in the order "
                                 f"{sequence(sender, kind)} (a channel delivers in order)")
    from trainrun.distributed.pipelining import simulator
    simulator.simulate_ranks(lambda r: orders[r], num_ranks, num_stages, n_microbatches)  # raises on a deadlock
    return orders


class _PipelineSchedule:
    """Runs this rank's lowered action list over its stages. step(*args, target=, losses=, **kwargs): the first
    stage takes the inputs, the last the target (and its rank returns the merged output); loss_fn(output,
    target) runs per microbatch on the last stage (without a loss_fn the schedule runs forwards only);
    scale_grads divides each microbatch's loss by the number of microbatches, so the gradients are the mean over
    microbatches (False: their sum, as PyTorch 2.6)."""

    _stage_rank = staticmethod(loop_rank)  # where each stage runs (the V layout: zero_bubble.v_rank)
    # True: step() records when each of this rank's computations ran, as self.timeline (timeline.Timeline; join
    # the ranks' with Timeline.gather), to set the measured bubble next to the simulator's.
    record_timeline = False

    def _setup(self, stages, order, n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec, scale_grads):
        if n_microbatches < 1:
            raise ValueError(f"n_microbatches must be positive, got {n_microbatches}")
        for stage in stages:
            stage._use_layout(self._stage_rank)
        self._rank = self._stage_rank(stages[0].stage_index, stages[0].group_size)
        self._stages = {stage.stage_index: stage for stage in stages}
        self._n_microbatches, self._loss_fn = n_microbatches, loss_fn
        self._args_chunk_spec, self._kwargs_chunk_spec = args_chunk_spec, kwargs_chunk_spec
        self.scale_grads = scale_grads
        # fully_shard modules of each stage (the outermost ones): a stage's gradients are reduce-scattered once,
        # by its last weight pass; the earlier ones accumulate unreduced (PyTorch's no-sync microbatches).
        self._sharded = {st.stage_index: _sharded_roots(st.submod) for st in stages}
        self._sharded = {s: roots for s, roots in self._sharded.items() if roots}
        validate(order, n_microbatches)
        self._use_order(order)
        self._first = next((st for st in stages if st.is_first), None)
        self._last = next((st for st in stages if st.is_last), None)

    def _num_ranks(self):
        stage = next(iter(self._stages.values()))
        return stage.num_stages // len(self._stages)

    def _dump_csv(self, filename):
        """Writes every rank's compute order (PyTorch's "compute_only" CSV)."""
        R = self._num_ranks()
        with open(filename, "w") as f:
            f.write(orders_to_csv([self._rank_order(r, R) for r in range(R)]))

    def _load_csv(self, filename, format="compute_only"):
        """Runs the compute orders of a CSV instead of the schedule's own (checked: orders_from_csv)."""
        if format != "compute_only":
            raise NotImplementedError(f"_load_csv: format {format!r} (trainrun reads 'compute_only' and lowers it)")
        stage = next(iter(self._stages.values()))
        R = self._num_ranks()
        with open(filename) as f:
            orders = orders_from_csv(f.read(), R, stage.num_stages, self._n_microbatches, self._stage_rank)
        self._use_order(orders[self._rank])

    def _use_order(self, order):
        stage = next(iter(self._stages.values()))
        self.pipeline_order = {self._rank: order}
        self.actions = lower(order, stage.num_stages, set(self._sharded))
        if self._loss_fn is None:  # no loss: forward only (inference), as PyTorch's schedules without loss_fn
            self.actions = [a for a in self.actions if a.computation_type not in BACKWARDS and
                            a.computation_type not in (W, RECV_B, SEND_B)]
        self._last_weight_pass = {a.stage_index: a for a in order if a.computation_type in WEIGHT_PASSES}

    def step(self, *args, target=None, losses=None, **kwargs):
        n, first, last = self._n_microbatches, self._first, self._last
        for stage in self._stages.values():
            stage.clear()
        arg_chunks, kwarg_chunks = split_args_kwargs_into_chunks(args, kwargs, n, self._args_chunk_spec,
                                                                 self._kwargs_chunk_spec) if first is not None \
            else ([()] * n, [{}] * n)
        targets = split_args_kwargs_into_chunks((target,), {}, n)[0] if last is not None and target is not None \
            else None
        if last is not None and self._loss_fn is not None and targets is None:
            raise ValueError("step(): the last stage needs target= for the loss")
        outputs, microbatch_losses = {}, {}
        events, start = [], time.perf_counter()
        try:
            for a in self.actions:
                m, stage = a.microbatch_index, self._stages[a.stage_index]
                began = time.perf_counter() if self.record_timeline and a.computation_type in (F, B, I, W) else None
                if a.computation_type == RECV_F:
                    stage.recv_forward(m)
                elif a.computation_type == F:
                    out = stage.forward(m, arg_chunks[m], kwarg_chunks[m])
                    if stage.is_last:
                        outputs[m] = _detached(out)  # for the merged output; the graph goes with the backward
                        if self._loss_fn is not None:
                            microbatch_losses[m] = self._loss_fn(out, targets[m][0])
                    del out  # the stage holds it until its backward; a reference here would outlive that
                elif a.computation_type == SEND_F:
                    stage.send_forward(m)
                elif a.computation_type == RECV_B:
                    stage.recv_backward(m)
                elif a.computation_type in (UNSHARD, RESHARD):
                    for module in self._sharded[a.stage_index]:
                        if a.computation_type == UNSHARD:
                            module.unshard(async_op=True)  # forward waits for it
                        else:
                            module.reshard()
                elif a.computation_type in BACKWARDS:
                    self._gradient_sync(a)
                    loss = None
                    if stage.is_last:
                        loss = microbatch_losses[m] / n if self.scale_grads else microbatch_losses[m]
                    stage.backward(m, loss, weights=a.computation_type == B)
                    if stage.is_last:  # the loss's graph reaches the received input (and its .grad): let it go
                        microbatch_losses[m], loss = microbatch_losses[m].detach(), None
                elif a.computation_type == W:
                    self._gradient_sync(a)
                    stage.backward_weight(m)
                elif a.computation_type == SEND_B:
                    stage.send_backward(m)
                if began is not None:
                    events.append((began - start, time.perf_counter() - start, a))
        finally:
            for stage in self._stages.values():
                stage.wait_sends()
        if self.record_timeline:
            from trainrun.distributed.pipelining.timeline import Timeline
            self.timeline = Timeline({self._rank: events}, 1, n, row_name="rank")
        if last is not None:
            if losses is not None:  # this step's losses only, as PyTorch's (the container is cleared first)
                losses.clear()
                losses.extend(microbatch_losses[m].detach() for m in range(n) if m in microbatch_losses)
            return merge_chunks([outputs[m] for m in range(n)])
        return None


    def _gradient_sync(self, a):
        """A fully_shard stage reduces its gradients in its last weight pass only."""
        for module in self._sharded.get(a.stage_index, ()):
            module.set_requires_gradient_sync(a.computation_type != I and self._last_weight_pass[a.stage_index] is a)


def _detached(out):
    if isinstance(out, (tuple, list)):
        return type(out)(_detached(o) for o in out)
    return out.detach() if hasattr(out, "detach") else out


def _sharded_roots(module):
    """The outermost fully_shard modules in module (itself, if it is one). Known by their methods, not by
    class: fsdp/ sits beside pipelining/ in the layer plan, not below it. A stage may also be a plain callable
    (no children): nothing of it is sharded."""
    roots, stack = [], [module]
    while stack:
        m = stack.pop()
        if hasattr(m, "set_requires_gradient_sync") and hasattr(m, "unshard") and hasattr(m, "reshard"):
            roots.append(m)
        else:
            stack.extend(m.children() if hasattr(m, "children") else ())
    return roots


class PipelineScheduleSingle(_PipelineSchedule):
    """A schedule for one stage per rank."""
    _order = staticmethod(gpipe_order)

    def __init__(self, stage, n_microbatches, loss_fn=None, args_chunk_spec=None, kwargs_chunk_spec=None,
                 output_merge_spec=None, scale_grads=True):
        self._stage = stage
        order = self._order(stage.stage_index, stage.num_stages, n_microbatches) if n_microbatches >= 1 else []
        self._rank_order = lambda r, R: self._order(r, R, n_microbatches)
        self._setup([stage], order, n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec, scale_grads)


class PipelineScheduleMulti(_PipelineSchedule):
    """A schedule for several stages per rank (stages: this rank's, looped over the ranks: rank r holds
    stages r, r + R, ...; or for ScheduleZBVZeroBubble, in a V)."""
    _order = staticmethod(looped_bfs_order)

    def __init__(self, stages, n_microbatches, loss_fn=None, args_chunk_spec=None, kwargs_chunk_spec=None,
                 output_merge_spec=None, stage_index_to_group_rank=None, use_full_backward=None, scale_grads=True):
        stages = sorted(stages, key=lambda st: st.stage_index)
        if not stages:
            raise ValueError(f"{type(self).__name__}: give this rank's stages (at least one)")
        num_stages = stages[0].num_stages
        ranks = stages[0].group_size
        if stage_index_to_group_rank is not None:  # PyTorch's explicit placement: here, the schedule's own one
            own = {s: self._stage_rank(s, ranks) for s in range(num_stages)}
            if dict(stage_index_to_group_rank) != own:
                raise NotImplementedError(f"{type(self).__name__}: stage_index_to_group_rank "
                                          f"{dict(stage_index_to_group_rank)} is not this schedule's placement {own}")
        # (use_full_backward: deprecated in PyTorch; backward here splits into input and weight parts by the
        # schedule's own actions)
        rank = self._stage_rank(stages[0].stage_index, ranks)
        expected = [s for s in range(num_stages) if self._stage_rank(s, ranks) == rank]
        if [st.stage_index for st in stages] != expected:
            layout = "r, r + R, ..." if self._stage_rank is loop_rank else "r and 2R - 1 - r"
            raise ValueError(f"{type(self).__name__}: this rank's stages must be {layout} for R = {ranks} ranks "
                             f"({expected}), got {[st.stage_index for st in stages]} of {num_stages}")
        order = self._order(rank, ranks, len(stages), n_microbatches) if n_microbatches >= 1 else []
        self._rank_order = lambda r, R: self._order(r, R, len(stages), n_microbatches)
        self._setup(stages, order, n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec, scale_grads)


class ScheduleGPipe(PipelineScheduleSingle):
    _order = staticmethod(gpipe_order)


class Schedule1F1B(PipelineScheduleSingle):
    _order = staticmethod(one_f_one_b_order)


class ScheduleLoopedBFS(PipelineScheduleMulti):
    _order = staticmethod(looped_bfs_order)


class ScheduleInterleaved1F1B(PipelineScheduleMulti):
    _order = staticmethod(interleaved_1f1b_order)


def get_schedule_class(schedule_name):
    from trainrun.distributed.pipelining.zero_bubble import ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble
    schedules = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B, "LoopedBFS": ScheduleLoopedBFS,
                 "Interleaved1F1B": ScheduleInterleaved1F1B, "InterleavedZeroBubble": ScheduleInterleavedZeroBubble,
                 "ZBVZeroBubble": ScheduleZBVZeroBubble, "PipelineScheduleSingle": PipelineScheduleSingle,
                 "PipelineScheduleMulti": PipelineScheduleMulti}
    for key, cls in schedules.items():
        if key.lower() == schedule_name.lower():
            return cls
    raise ValueError(f"unknown schedule {schedule_name!r} (trainrun has {sorted(schedules)})")


def __getattr__(name):
    if name in ("ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble"):  # (zero_bubble.py builds on this module)
        from trainrun.distributed.pipelining import zero_bubble
        return getattr(zero_bubble, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
