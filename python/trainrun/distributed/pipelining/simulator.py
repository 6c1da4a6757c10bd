"""Runs pipeline schedules on paper: each rank executes its lowered action
list in order, a forward takes forward_time and a backward backward_time
(split, its input part I takes input_time and its weight part W weight_time:
half of backward_time each unless given), a send is posted at once (non-blocking, as the executor's), and a receive
waits until its matching send has been posted plus comm_time. The result is
each rank's timeline, the step's makespan, the bubble ratio (idle time over
total time) and the peak of microbatches each stage holds. A schedule whose
receives can never be satisfied is reported as a deadlock naming every
stuck action, which makes the simulator a validator for hand-written
schedules too.

    timeline = simulate(lambda s: one_f_one_b_order(s, 4, 8), num_stages=4, n_microbatches=8)
    print(timeline.render())                  # one row per stage, F/B per microbatch
    timeline.dump_chrometrace("1f1b.json")    # for chrome://tracing or Perfetto"""
from trainrun.distributed.pipelining.schedules import B, F, I, RECV_B, RECV_F, SEND_B, SEND_F, W, lower

from trainrun.distributed.pipelining.timeline import Timeline

_MATCHING_SEND = {RECV_F: SEND_F, RECV_B: SEND_B}


def simulate(order_of_stage, num_stages, n_microbatches, forward_time=1.0, backward_time=2.0, comm_time=0.0,
             input_time=None, weight_time=None):
    """order_of_stage(stage) -> that stage's compute order (e.g. one_f_one_b_order with the rest bound)."""
    lowered = {s: lower(order_of_stage(s), num_stages) for s in range(num_stages)}
    return _run(lowered, num_stages, n_microbatches, _costs(forward_time, backward_time, input_time, weight_time),
                comm_time, "stage")


def simulate_ranks(order_of_rank, num_ranks, num_stages, n_microbatches, forward_time=1.0, backward_time=2.0,
                   comm_time=0.0, input_time=None, weight_time=None):
    """For several stages per rank (interleaved_1f1b_order, looped_bfs_order, the zero-bubble orders):
    order_of_rank(rank) -> that rank's compute order over its stages; the timeline has one row per rank."""
    lowered = {r: lower(order_of_rank(r), num_stages) for r in range(num_ranks)}
    return _run(lowered, num_ranks, n_microbatches, _costs(forward_time, backward_time, input_time, weight_time),
                comm_time, "rank")


def _costs(forward_time, backward_time, input_time, weight_time):
    return {F: forward_time, B: backward_time, I: backward_time / 2 if input_time is None else input_time,
            W: backward_time / 2 if weight_time is None else weight_time}


def _run(lowered, rows, n_microbatches, costs, comm_time, row_name):
    """Executes each row's (a rank's) lowered list; receives match sends by (kind, sending stage, microbatch)."""
    position = {r: 0 for r in range(rows)}
    clock = {r: 0.0 for r in range(rows)}
    posted = {}  # (kind, sending stage, microbatch) -> time the send was posted
    events = {r: [] for r in range(rows)}
    while any(position[r] < len(lowered[r]) for r in range(rows)):
        progressed = False
        for r in range(rows):
            while position[r] < len(lowered[r]):
                a = lowered[r][position[r]]
                kind, s = a.computation_type, a.stage_index
                if kind in costs:
                    cost = costs[kind]
                    events[r].append((clock[r], clock[r] + cost, a))
                    clock[r] += cost
                elif kind in (SEND_F, SEND_B):
                    posted[(kind, s, a.microbatch_index)] = clock[r]
                else:  # a receive: from the previous stage (forward) or the next (backward)
                    sender = s - 1 if kind == RECV_F else s + 1
                    key = (_MATCHING_SEND[kind], sender, a.microbatch_index)
                    if key not in posted:
                        break  # blocked until the sender gets there
                    clock[r] = max(clock[r], posted[key] + comm_time)
                position[r] += 1
                progressed = True
        if not progressed:
            stuck = [f"stage {lowered[r][position[r]].stage_index} at {lowered[r][position[r]]!r}"
                     for r in range(rows) if position[r] < len(lowered[r])]
            raise ValueError("the schedule deadlocks: " + ", ".join(stuck))
    return Timeline(events, rows, n_microbatches, row_name)
