"""Pipeline parallelism: schedules as action lists (their order, PyTorch's
printed form, lowering, validation) without ranks, and every schedule on 2
and 4 ranks under the launcher against one process over the same
microbatches (gradients as the mean and as the sum over microbatches)."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from trainrun.distributed.pipelining import schedules  # noqa: E402


def test_gpipe_and_1f1b_orders_in_pytorchs_notation():
    assert [repr(a) for a in schedules.gpipe_order(1, 2, 3)] == ["1F0", "1F1", "1F2", "1B0", "1B1", "1B2"]
    assert [repr(a) for a in schedules.one_f_one_b_order(0, 2, 4)] == ["0F0", "0F1", "0B0", "0F2", "0B1", "0F3",
                                                                       "0B2", "0B3"]
    assert [repr(a) for a in schedules.one_f_one_b_order(1, 2, 4)] == ["1F0", "1B0", "1F1", "1B1", "1F2", "1B2",
                                                                       "1F3", "1B3"]
    assert schedules._Action.from_str("2RECV_B3") == schedules._Action(2, "RECV_B", 3)


@pytest.mark.parametrize("stages,micro", [(2, 2), (2, 4), (4, 4), (4, 8)])
def test_1f1b_keeps_at_most_stages_minus_index_microbatches_alive(stages, micro):
    def peak_live(order):
        live = peak = 0
        for a in order:
            live += 1 if a.computation_type == "F" else -1
            peak = max(peak, live)
        return peak
    for s in range(stages):
        assert peak_live(schedules.one_f_one_b_order(s, stages, micro)) == min(stages - s, micro)
        assert peak_live(schedules.gpipe_order(s, stages, micro)) == micro  # every microbatch before a backward


def test_lowering_pairs_every_send_with_the_neighbours_receive():
    stages, micro = 3, 4
    lowered = {s: schedules.lower(schedules.one_f_one_b_order(s, stages, micro), stages) for s in range(stages)}
    for s in range(stages - 1):
        sends_f = [a.microbatch_index for a in lowered[s] if a.computation_type == "SEND_F"]
        recvs_f = [a.microbatch_index for a in lowered[s + 1] if a.computation_type == "RECV_F"]
        sends_b = [a.microbatch_index for a in lowered[s + 1] if a.computation_type == "SEND_B"]
        recvs_b = [a.microbatch_index for a in lowered[s] if a.computation_type == "RECV_B"]
        assert sends_f == recvs_f == list(range(micro)) and sends_b == recvs_b == list(range(micro))


@pytest.mark.parametrize("stages,micro", [(2, 2), (4, 4), (4, 8), (3, 7)])
def test_the_simulator_gives_the_textbook_bubble_and_memory(stages, micro, tmp_path):
    """GPipe and 1F1B both idle (S - 1) / (M + S - 1) of the time; GPipe holds every microbatch on every
    stage, 1F1B at most S - s on stage s."""
    import json
    from trainrun.distributed.pipelining.simulator import simulate
    for order, peaks in ((schedules.gpipe_order, [micro] * stages),
                         (schedules.one_f_one_b_order, [min(stages - s, micro) for s in range(stages)])):
        t = simulate(lambda s: order(s, stages, micro), stages, micro, forward_time=1.0, backward_time=2.0)
        assert t.makespan == pytest.approx((micro + stages - 1) * 3.0)
        assert t.bubble_ratio == pytest.approx((stages - 1) / (micro + stages - 1))
        assert [t.peak_live[s] for s in range(stages)] == peaks
        assert t.render().splitlines()[0].startswith("stage 0: F")
    slower = simulate(lambda s: schedules.one_f_one_b_order(s, stages, micro), stages, micro, comm_time=0.5)
    assert slower.makespan > t.makespan  # each hop adds its latency
    t.dump_chrometrace(tmp_path / "trace.json")
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert len(events) == 2 * stages * micro and {e["tid"] for e in events} == set(range(stages))


def test_the_simulator_names_the_actions_of_a_deadlock():
    from trainrun.distributed.pipelining.simulator import simulate
    A = schedules._Action
    # Each order alone is valid, but stage 1 wants microbatch 1 first while stage 0 sends it only after
    # microbatch 0's backward, which stage 1 runs last.
    orders = {0: [A(0, "F", 0), A(0, "B", 0), A(0, "F", 1), A(0, "B", 1)],
              1: [A(1, "F", 1), A(1, "B", 1), A(1, "F", 0), A(1, "B", 0)]}
    with pytest.raises(ValueError, match=r"deadlocks: stage 0 at 0RECV_B0, stage 1 at 1RECV_F1"):
        simulate(lambda s: orders[s], 2, 2)


def test_validation_names_the_first_bad_action():
    A = schedules._Action
    with pytest.raises(ValueError, match="action 0B1: backward before the forward"):
        schedules.validate([A(0, "F", 0), A(0, "B", 1)], 2)
    with pytest.raises(ValueError, match="never runs the backward of microbatches \\[1\\]"):
        schedules.validate([A(0, "F", 0), A(0, "F", 1), A(0, "B", 0)], 2)
    with pytest.raises(ValueError, match="unknown schedule"):
        schedules.get_schedule_class("Nope")


@pytest.mark.parametrize("nproc", [2, 4])
@pytest.mark.parametrize("schedule", ["GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "Interleaved1F1B-csv",
                                      "InterleavedZeroBubble", "ZBVZeroBubble", "1F1B-split", "ZBVZeroBubble-split"])
@pytest.mark.parametrize("per_stage,reduction", [(1, "mean"), (2, "sum")])
def test_schedules_train_as_one_process(ranks, nproc, schedule, per_stage, reduction):
    out = ranks.run_script(nproc, "tests/python/pipelining/pipeline_worker.py", schedule, str(nproc * per_stage),
                           reduction).stdout
    for rank in range(nproc):
        assert f"rank {rank}: pipeline {schedule} ok" in out


@pytest.mark.parametrize("ranks_,chunks,micro", [(2, 2, 4), (4, 2, 8), (4, 3, 8), (2, 4, 2)])
def test_interleaved_1f1b_shrinks_the_bubble_by_the_stages_per_rank(ranks_, chunks, micro):
    """Each rank's work split in `chunks` stages: the bubble is (R - 1) / (v M + R - 1), the textbook
    interleaved figure, below 1F1B's (R - 1) / (M + R - 1); looped BFS takes as long; nothing deadlocks."""
    from trainrun.distributed.pipelining import schedules, simulator
    timeline = simulator.simulate_ranks(lambda r: schedules.interleaved_1f1b_order(r, ranks_, chunks, micro), ranks_,
                                        ranks_ * chunks, micro, forward_time=1.0 / chunks, backward_time=2.0 / chunks)
    assert timeline.bubble_ratio == pytest.approx((ranks_ - 1) / (chunks * micro + ranks_ - 1))
    plain = simulator.simulate(lambda s: schedules.one_f_one_b_order(s, ranks_, micro), ranks_, micro)
    assert timeline.makespan < plain.makespan
    bfs = simulator.simulate_ranks(lambda r: schedules.looped_bfs_order(r, ranks_, chunks, micro), ranks_,
                                   ranks_ * chunks, micro, forward_time=1.0 / chunks, backward_time=2.0 / chunks)
    assert bfs.makespan == pytest.approx(timeline.makespan)
    order = schedules.interleaved_1f1b_order(1, ranks_, chunks, micro)
    assert sorted(str(a) for a in order) == sorted(f"{c * ranks_ + 1}{k}{m}" for c in range(chunks)
                                                   for m in range(micro) for k in "FB")
    with pytest.raises(ValueError, match="multiple of the"):
        schedules.interleaved_1f1b_order(0, ranks_, chunks, micro + 1)


def test_schedules_load_from_csv_checked():
    """Orders round-trip through PyTorch's compute-only CSV; a CSV whose actions sit on another rank's stage,
    repeat a microbatch, or would deadlock is refused naming what is wrong."""
    orders = [schedules.interleaved_1f1b_order(r, 2, 2, 4) for r in range(2)]
    text = schedules.orders_to_csv(orders)
    assert text.splitlines()[0].startswith("0F0,0F1,2F0,2F1,")
    assert schedules.orders_from_csv(text, 2, 4, 4) == orders
    with pytest.raises(ValueError, match="stage 1, which does not run on rank 0"):
        schedules.orders_from_csv("1F0\n" + text.splitlines()[1], 2, 4, 4)
    with pytest.raises(ValueError, match="rank 0, stage 0: .* forwarded twice"):
        schedules.orders_from_csv(text.replace("0F1,", "0F0,", 1), 2, 4, 4)
    A = schedules._Action
    with pytest.raises(ValueError, match=r"stage 1 runs F of microbatches \[1, 0\] but stage 0 sends them"):
        schedules.orders_from_csv("0F0,0F1,0B0,0B1\n1F1,1F0,1B0,1B1\n", 2, 2, 2)
    # Stage 0 waits for microbatch 0's gradient before sending microbatch 1, which stage 1 waits for first.
    stuck = schedules.orders_to_csv([[A(0, "F", 0), A(0, "B", 0), A(0, "F", 1), A(0, "B", 1)],
                                     [A(1, "F", 0), A(1, "F", 1), A(1, "B", 0), A(1, "B", 1)]])
    with pytest.raises(ValueError, match="deadlocks: stage 0 at 0RECV_B0, stage 1 at 1RECV_F1"):
        schedules.orders_from_csv(stuck, 2, 2, 2)


PYTORCH26 = ROOT / "tests" / "python" / "data" / "pytorch26_schedules.json"


def test_multi_stage_orders_are_pytorch_26s():
    """Every rank's compute actions equal PyTorch 2.6's pipeline_order (bubbles left out) for LoopedBFS,
    Interleaved1F1B, InterleavedZeroBubble and ZBVZeroBubble over a grid of ranks, stages per rank and
    microbatches (dumped once from the peer: tests/python/data/make_pytorch26_schedules.py)."""
    import json

    from trainrun.distributed.pipelining import zero_bubble
    rules = {"LoopedBFS": schedules.looped_bfs_order, "Interleaved1F1B": schedules.interleaved_1f1b_order,
             "InterleavedZeroBubble": zero_bubble.interleaved_zero_bubble_order,
             "ZBVZeroBubble": zero_bubble.zbv_order}
    expected = json.loads(PYTORCH26.read_text())
    assert {key.split()[0] for key in expected} == set(rules) and len(expected) == 30
    for key, theirs in expected.items():
        name, ranks, per_rank, micro = key.split()
        ours = [[repr(a) for a in rules[name](r, int(ranks), int(per_rank), int(micro))] for r in range(int(ranks))]
        assert ours == theirs, key


@pytest.mark.parametrize("ranks_,micro", [(2, 4), (4, 8), (4, 16)])
def test_zero_bubble_schedules_fill_the_bubble_with_weight_passes(ranks_, micro):
    """With the backward split in halves (I and W each as long as a forward, the paper's setting), ZB-1P and
    ZB-V leave a fraction of interleaved 1F1B's bubble on the same two stages per rank; every stage runs
    each microbatch's W after its I; a microbatch's activations count as live until its W."""
    from trainrun.distributed.pipelining import simulator, zero_bubble
    costs = dict(forward_time=0.5, backward_time=1.0)
    interleaved = simulator.simulate_ranks(lambda r: schedules.interleaved_1f1b_order(r, ranks_, 2, micro), ranks_,
                                           2 * ranks_, micro, **costs)
    for rule, layout in ((zero_bubble.interleaved_zero_bubble_order, schedules.loop_rank),
                         (zero_bubble.zbv_order, zero_bubble.v_rank)):
        orders = [rule(r, ranks_, 2, micro) for r in range(ranks_)]
        for r, order in enumerate(orders):
            schedules.validate(order, micro)
            assert {layout(a.stage_index, ranks_) for a in order} == {r}
        zb = simulator.simulate_ranks(lambda r: orders[r], ranks_, 2 * ranks_, micro, **costs)
        assert zb.bubble_ratio < 0.5 * interleaved.bubble_ratio, (rule.__name__, zb.bubble_ratio)
        assert zb.makespan < interleaved.makespan
        # The round trip through a CSV keeps I and W and checks the V layout.
        text = schedules.orders_to_csv(orders)
        assert schedules.orders_from_csv(text, ranks_, 2 * ranks_, micro, layout) == orders


def test_split_backward_actions_are_checked():
    A = schedules._Action
    assert A.from_str("3I1") == A(3, "I", 1) and A.from_str("0W2") == A(0, "W", 2)
    assert [repr(a) for a in schedules.lower([A(1, "F", 0), A(1, "I", 0), A(1, "W", 0)], 3)] == \
        ["1RECV_F0", "1F0", "1SEND_F0", "1RECV_B0", "1I0", "1SEND_B0", "1W0"]
    with pytest.raises(ValueError, match="1W0: the weight pass of microbatch 0 needs its input pass"):
        schedules.validate([A(1, "F", 0), A(1, "W", 0), A(1, "I", 0)], 1)
    with pytest.raises(ValueError, match=r"never runs the weight pass \(W\) of microbatches \[0\]"):
        schedules.validate([A(1, "F", 0), A(1, "I", 0)], 1)
    with pytest.raises(ValueError, match="needs its input pass"):
        schedules.validate([A(1, "F", 0), A(1, "B", 0), A(1, "W", 0)], 1)
    assert schedules.get_schedule_class("zbvzerobubble").__name__ == "ScheduleZBVZeroBubble"
    assert schedules.get_schedule_class("InterleavedZeroBubble").__name__ == "ScheduleInterleavedZeroBubble"


def test_timelines_draw_as_svg_and_png(tmp_path):
    """A simulated ZB-V timeline as an SVG (well-formed, one box per computation, F/B/I/W coloured) and a PNG."""
    import xml.etree.ElementTree as ET

    from trainrun.distributed.pipelining import simulator, zero_bubble
    t = simulator.simulate_ranks(lambda r: zero_bubble.zbv_order(r, 2, 2, 4), 2, 4, 4, forward_time=0.5,
                                 backward_time=1.0)
    svg = ET.fromstring(t.to_svg("ZB-V"))
    boxes = [e for e in svg.iter("{http://www.w3.org/2000/svg}rect") if e.find("{http://www.w3.org/2000/svg}title")
             is not None]
    assert len(boxes) == sum(len(evs) for evs in t.events.values()) == 2 * 2 * 4 * 3
    assert {b.get("fill") for b in boxes} == {"#4c78a8", "#e45756", "#54a24b"}  # F, I, W
    assert "bubble 4.0%" in t.to_svg("ZB-V")
    t.save(tmp_path / "zbv.png", "ZB-V")
    assert (tmp_path / "zbv.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("nproc", [2, 4])
@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_every_schedule_runs_100_steps_without_hanging(ranks, nproc, transport):
    env = {"TRAINRUN_SHM_COLLECTIVES": "1" if transport == "shm" else "0"}
    out = ranks.run_script(nproc, "tests/python/pipelining/pipeline_soak_worker.py", "soak", env=env,
                           deadline=240).stdout
    for rank in range(nproc):
        assert f"rank {rank}: pipeline soak ok" in out


@pytest.mark.parametrize("nproc", [2, 4])
def test_1f1b_keeps_at_most_stages_minus_index_microbatches_in_memory(ranks, nproc):
    """The allocator's peak, not the simulator: 1F1B frees a microbatch's activations after its backward."""
    out = ranks.run_script(nproc, "tests/python/pipelining/pipeline_soak_worker.py", "memory").stdout
    for rank in range(nproc):
        assert f"rank {rank}: pipeline memory ok" in out


@pytest.mark.parametrize("schedule", ["GPipe", "1F1B", "ZBVZeroBubble"])
def test_pipeline_of_fully_sharded_stages_trains_as_one_process(ranks, schedule):
    """PP(2) x FSDP(2) on 4 ranks: gradients reduce-scattered once per step, the norm summed over both dims."""
    out = ranks.run_script(4, "tests/python/pipelining/pp_fsdp_worker.py", schedule).stdout
    for rank in range(4):
        assert f"rank {rank}: pp x fsdp {schedule} ok" in out
