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
import json

from trainrun.distributed.pipelining.schedules import B, F, I, RECV_B, RECV_F, SEND_B, SEND_F, W, lower

_MATCHING_SEND = {RECV_F: SEND_F, RECV_B: SEND_B}


class Timeline:
    def __init__(self, events, num_stages, n_microbatches):
        self.events = events  # stage -> [(start, end, action)] of its computations
        self.num_stages, self.n_microbatches = num_stages, n_microbatches
        self.makespan = max((end for evs in events.values() for _, end, _ in evs), default=0.0)
        busy = sum(end - start for evs in events.values() for start, end, _ in evs)
        total = self.makespan * num_stages
        self.bubble_ratio = 1.0 - busy / total if total else 0.0
        self.peak_live = {}
        for stage, evs in events.items():
            live = peak = 0
            for _, _, a in evs:
                if a.computation_type == I:  # a microbatch's activations stay until its weight pass
                    continue
                live += 1 if a.computation_type == F else -1
                peak = max(peak, live)
            self.peak_live[stage] = peak

    def render(self, width=None):
        """One text row per stage; each time unit shows F or B and the microbatch (idle: '.')."""
        unit = min((end - start for evs in self.events.values() for start, end, _ in evs), default=1.0)
        columns = int(round(self.makespan / unit)) if width is None else width
        scale = columns / self.makespan if self.makespan else 1.0
        rows = []
        for stage in sorted(self.events):
            cells = ["."] * columns
            for start, end, a in self.events[stage]:
                first, last = int(round(start * scale)), int(round(end * scale))
                label = f"{a.computation_type}{a.microbatch_index}"
                for c in range(first, min(last, columns)):
                    cells[c] = label[(c - first) % len(label)] if last - first >= len(label) else label[0]
            rows.append(f"stage {stage}: {''.join(cells)}")
        rows.append(f"makespan {self.makespan:g}, bubble {self.bubble_ratio:.1%}, peak live microbatches "
                    f"{[self.peak_live[s] for s in sorted(self.peak_live)]}")
        return "\n".join(rows)

    def dump_chrometrace(self, path):
        """The timeline as Chrome trace events (one thread per stage), microseconds = time units."""
        trace = [{"name": f"{a.computation_type}{a.microbatch_index}", "ph": "X", "pid": 0, "tid": stage,
                  "ts": start, "dur": end - start, "cat": "forward" if a.computation_type == F else "backward"}
                 for stage, evs in self.events.items() for start, end, a in evs]
        with open(path, "w") as f:
            json.dump({"traceEvents": trace}, f)


def simulate(order_of_stage, num_stages, n_microbatches, forward_time=1.0, backward_time=2.0, comm_time=0.0,
             input_time=None, weight_time=None):
    """order_of_stage(stage) -> that stage's compute order (e.g. one_f_one_b_order with the rest bound)."""
    lowered = {s: lower(order_of_stage(s), num_stages) for s in range(num_stages)}
    return _run(lowered, num_stages, n_microbatches, _costs(forward_time, backward_time, input_time, weight_time),
                comm_time)


def simulate_ranks(order_of_rank, num_ranks, num_stages, n_microbatches, forward_time=1.0, backward_time=2.0,
                   comm_time=0.0, input_time=None, weight_time=None):
    """For several stages per rank (interleaved_1f1b_order, looped_bfs_order, the zero-bubble orders):
    order_of_rank(rank) -> that rank's compute order over its stages; the timeline has one row per rank."""
    lowered = {r: lower(order_of_rank(r), num_stages) for r in range(num_ranks)}
    return _run(lowered, num_ranks, n_microbatches, _costs(forward_time, backward_time, input_time, weight_time),
                comm_time)


def _costs(forward_time, backward_time, input_time, weight_time):
    return {F: forward_time, B: backward_time, I: backward_time / 2 if input_time is None else input_time,
            W: backward_time / 2 if weight_time is None else weight_time}


def _run(lowered, rows, n_microbatches, costs, comm_time):
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
    return Timeline(events, rows, n_microbatches)
