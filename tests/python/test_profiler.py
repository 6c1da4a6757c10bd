"""trainrun.profiler: record_function ranges (block and decorator) and ProfilerStep#N ranges land in the
profile with wall times that contain what ran inside; schedule() follows PyTorch's actions step by step;
on_trace_ready fires after each RECORD_AND_SAVE step; the Chrome trace is valid JSON with the ranges."""
import json
import time

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun.profiler import (ProfilerAction, ProfilerActivity, profile, record_function, schedule,  # noqa: E402
                               tensorboard_trace_handler)


def test_ranges_are_recorded_with_their_times(tmp_path):
    @record_function("decorated")
    def work():
        time.sleep(0.002)
        return torch.ones(10) * 2

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("outer"):
            time.sleep(0.003)
            work()
            work()
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["decorated"].count == 2 and averages["outer"].count == 1
    assert averages["outer"].cpu_time_total >= 5000  # microseconds: the sleeps inside it
    assert averages["outer"].cpu_time_total >= averages["decorated"].cpu_time_total
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    assert table.splitlines()[3].split()[0] == "outer" and "decorated" in table
    with record_function("after"):  # outside the profile: not recorded
        pass
    assert "after" not in {e.name for e in prof.events()}
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    assert {e["name"] for e in events if e["cat"] == "user_annotation"} == {"outer", "decorated"}
    assert {"aten::fill_", "aten::mul"} <= {e["name"] for e in events if e["cat"] == "cpu_op"}
    assert all(e["ph"] == "X" for e in events)
    with pytest.raises(ValueError, match="sort by"):
        prof.key_averages().table(sort_by="bogus")


def test_schedule_follows_pytorch():
    torch_peer = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    ours = schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    theirs = torch_peer.profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    assert [ours(i).name for i in range(12)] == [theirs(i).name for i in range(12)]


def test_steps_and_on_trace_ready(tmp_path):
    ready = []
    with profile(schedule=schedule(wait=1, warmup=1, active=2), on_trace_ready=lambda p: ready.append(
            sorted({e.name for e in p.events()}))) as prof:
        for _ in range(8):
            with record_function("step_work"):
                torch.ones(4) + 1
            prof.step()
    # cycles of 4 steps: 0 wait, 1 warmup, 2 record, 3 record-and-save; then 4..7 again
    # (the ops inside step_work are events too: ones fills, + adds)
    assert ready == [["ProfilerStep#2", "ProfilerStep#3", "aten::add", "aten::fill_", "step_work"],
                     ["ProfilerStep#6", "ProfilerStep#7", "aten::add", "aten::fill_", "step_work"]]
    handler = tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="rank0")
    with profile(on_trace_ready=handler) as prof:
        with record_function("x"):
            pass
    written = list((tmp_path / "tb").glob("rank0.*.pt.trace.json"))
    assert len(written) == 1 and [e["name"] for e in json.loads(written[0].read_text())["traceEvents"]] == ["x"]
    assert ProfilerAction.RECORD_AND_SAVE.name == "RECORD_AND_SAVE"
    assert torch.autograd.profiler.record_function is record_function
