"""The zero-bubble schedules' compute orders (Qi et al., "Zero Bubble
Pipeline Parallelism", 2024), as PyTorch 2.6 builds them: each backward is
split into I (the gradient of the stage's input, which the previous stage
waits for) and W (the weights' gradients, which nobody waits for), and the
W actions fill what would otherwise be the pipeline's bubbles.

- interleaved_zero_bubble_order: ZB-1P over v stages per rank looped over
  the ranks (stage s on rank s % R), the microbatches in rounds of R;
- zbv_order: ZB-V, two stages per rank in a V (rank r holds stage r and
  stage 2R - 1 - r, so the last stage sits next to the first: the loss's
  gradient turns around on the same rank)."""
import collections

from trainrun.distributed.pipelining.schedules import F, I, W, PipelineScheduleMulti, _Action


def interleaved_zero_bubble_order(rank, num_ranks, stages_per_rank, n_microbatches):
    R, v, M = num_ranks, stages_per_rank, n_microbatches
    rounds = max(1, M // R)
    if M % rounds:
        raise ValueError(f"zero bubble: {M} microbatches must be a multiple of the number of rounds ({rounds})")
    per_round = M // rounds
    warmup = min((v - 1) * per_round + (R - 1 - rank), M * v)
    total = M * v

    def forward_stage(op):
        return ((op // per_round) % v) * R + rank

    def backward_stage(op):
        return (v - 1 - ((op - warmup) // per_round) % v) * R + rank

    next_mb = {kind: collections.defaultdict(int) for kind in (F, I, W)}

    def action(stage, kind):
        m = next_mb[kind][stage]
        next_mb[kind][stage] = m + 1
        return _Action(stage, kind, m)

    order, backward_ops, weights = [], [], 0
    for op in range(total + warmup):  # warm-up forwards, then F and I in turn, then the remaining I
        if op < warmup:
            order.append(action(forward_stage(op), F))
            continue
        if op < total:
            order.append(action(forward_stage(op), F))
        order.append(action(backward_stage(op), I))
        backward_ops.append(op)
        if op - warmup >= rank:  # rank r holds back its first r weight passes: they fill the cool-down bubble
            order.append(action(backward_stage(backward_ops[weights]), W))
            weights += 1
    for op in backward_ops[weights:]:
        order.append(action(backward_stage(op), W))
    return order


def v_stages(rank, num_ranks):
    """The two stages of `rank` in the V layout."""
    return rank, 2 * num_ranks - 1 - rank


def v_rank(stage, num_ranks):
    """The rank that holds `stage` in the V layout."""
    return stage if stage < num_ranks else 2 * num_ranks - 1 - stage


def zbv_order(rank, num_ranks, stages_per_rank, n_microbatches):
    if stages_per_rank != 2:
        raise ValueError(f"ZB-V runs exactly 2 stages per rank, got {stages_per_rank}")
    R, M = num_ranks, n_microbatches
    n = max(2 * R - 1, M)  # the pattern's microbatches; those beyond M are dropped at the end
    down, up = v_stages(rank, R)
    count = collections.Counter()
    order = []

    def add(stage, kind, counter=None):
        key = counter or (stage, kind)
        order.append(_Action(stage, kind, count[key]))
        count[key] += 1

    for _ in range(2 * (R - rank) - 1):
        add(down, F)
    for _ in range(rank):
        add(up, F)
        add(down, F)
    for _ in range(R - rank):
        add(up, F)
        add(up, I)
        add(up, W)
    while count[(up, F)] < count[(down, F)] or count[(down, F)] < n:
        if count[(down, F)] < n:
            add(down, F)
        add(down, I)
        add(down, W)
        add(up, F)
        add(up, I)
        add(up, W)
    for _ in range(rank):
        add(down, I)
        add(up, I)
    for _ in range(R - rank):
        add(down, I)
        add(down, W)
    while count[(up, W)] < count[(up, I)]:
        add(up, W)
    while count[(down, W)] < count[(down, I)]:
        add(down, W)
    return [a for a in order if a.microbatch_index < M]


class ScheduleInterleavedZeroBubble(PipelineScheduleMulti):
    """ZB-1P over this rank's stages r, r + R, ... (n_microbatches a multiple of the rounds of R)."""
    _order = staticmethod(interleaved_zero_bubble_order)


class ScheduleZBVZeroBubble(PipelineScheduleMulti):
    """ZB-V: give each rank its two stages of the V, r and 2R - 1 - r (the schedule connects them so)."""
    _order = staticmethod(zbv_order)
    _stage_rank = staticmethod(v_rank)
