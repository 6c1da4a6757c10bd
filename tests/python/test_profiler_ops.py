"""trainrun.profiler records operators (tensor/record_function.h): every op called through the dispatcher is an
event named as PyTorch names it ("aten::mm"; a custom op keeps its "ns::name"), once per call even though its
autograd kernel calls it again below itself; events nest by time on their thread, so self time is total time
less the children's; record_shapes gives each op its tensor arguments' sizes and key_averages groups by them;
backward shows the engine's nodes; a compiled call shows its forward, its backward and its generated loops;
nothing is recorded outside a profile."""
import threading

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun.profiler import ProfilerActivity, profile, record_function  # noqa: E402


def test_each_op_call_is_one_event_with_pytorch_names():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            torch.mm(a, b)
        torch.relu(a)
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts["aten::mm"] == 3 and counts["aten::relu"] == 1
    torch.mm(a, b)  # after the profile: not recorded
    assert sum(e.name == "aten::mm" for e in prof.events()) == 3


def test_an_op_with_autograd_is_one_event_not_two():
    w = torch.randn(4, 4, requires_grad=True)
    with profile() as prof:
        y = torch.mm(w, w)
    assert [e.name for e in prof.events()].count("aten::mm") == 1
    assert y.requires_grad


def test_self_time_is_total_less_children_and_the_table_has_pytorch_columns():
    a = torch.randn(64, 64)
    with profile() as prof:
        with record_function("outer"):
            for _ in range(4):
                torch.mm(a, a)
    outer = next(e for e in prof.events() if e.name == "outer")
    children = [c for c in outer.cpu_children if c.name == "aten::mm"]
    assert len(children) == 4 and all(c.cpu_parent is outer for c in children)
    assert outer.self_cpu_time_total == pytest.approx(outer.cpu_time_total - sum(c.cpu_time_total
                                                                                 for c in outer.cpu_children))
    assert 0 <= outer.self_cpu_time_total < outer.cpu_time_total
    lines = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10).splitlines()
    assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%", "CPU", "total",
                                "CPU", "time", "avg", "#", "of", "Calls"]
    assert lines[3].split()[0] == "outer"
    assert lines[-1].startswith("Self CPU time total:")
    assert prof.total_average().count == len(prof.events()) and "Self CPU time total" in str(prof)
    top = prof.key_averages().table(top_level_events_only=True)
    assert "outer" in top and "aten::mm" not in top


def test_record_shapes_and_group_by_input_shape():
    with profile(record_shapes=True) as prof:
        torch.mm(torch.randn(2, 3), torch.randn(3, 4))
        torch.mm(torch.randn(5, 3), torch.randn(3, 4))
        torch.mm(torch.randn(2, 3), torch.randn(3, 4))
    grouped = {tuple(map(tuple, e.input_shapes[:2])): e.count
               for e in prof.key_averages(group_by_input_shape=True) if e.key == "aten::mm"}
    assert grouped == {((2, 3), (3, 4)): 2, ((5, 3), (3, 4)): 1}
    assert "Input Shapes" in prof.key_averages(group_by_input_shape=True).table()
    with profile() as plain:
        torch.mm(torch.randn(2, 3), torch.randn(3, 4))
    assert all(e.input_shapes == [] for e in plain.events())


def test_backward_shows_the_engine_nodes_as_pytorch_names_them():
    x = torch.randn(8, 4, requires_grad=True)
    with profile() as prof:
        torch.nn.functional.relu(x).sum().backward()
    names = {e.name for e in prof.events()}
    assert any(n.startswith("autograd::engine::evaluate_function: Relu") for n in names)
    node = next(e for e in prof.events() if e.name.startswith("autograd::engine::evaluate_function: Relu"))
    assert any(c.name.startswith("Relu") for c in node.cpu_children)


def test_a_compiled_call_shows_its_graph_and_generated_loops():
    block = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))
    compiled = torch.compile(block)
    x = torch.randn(4, 8)
    compiled(x).sum().backward()  # recorded here, replayed in the profile
    with profile() as prof:
        compiled(x).sum().backward()
    names = [e.name for e in prof.events()]
    assert "CompiledFunction" in names and "CompiledFunctionBackward" in names
    forward = next(e for e in prof.events() if e.name == "CompiledFunction")
    assert {"aten::addmm"} <= {c.name for c in forward.cpu_children}
    entry = next(iter(compiled._compiled._cache.values()))
    if "loops" in (entry.joint.fusion_note or ""):  # (a machine without a C++ compiler runs the ops one by one)
        assert any(n.startswith("fused_") for n in names)


def test_custom_ops_keep_their_namespace():
    @torch.library.custom_op("proftest::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    with profile() as prof:
        twice(torch.randn(3))
    op = next(e for e in prof.events() if e.name == "proftest::twice")
    assert "aten::mul" in [c.name for c in op.cpu_children]
    assert not any(e.name.startswith("aten::proftest") for e in prof.events())


def test_profile_memory_counts_what_each_op_allocates():
    a = torch.randn(32, 32)
    with profile(profile_memory=True) as prof:
        with record_function("step"):
            y = torch.mm(a, a)  # 32 * 32 floats: 4096 bytes
            del y
    mm = next(e for e in prof.events() if e.name == "aten::mm")
    step = next(e for e in prof.events() if e.name == "step")
    assert mm.cpu_memory_usage == 4096 and mm.self_cpu_memory_usage == 4096
    assert step.cpu_memory_usage == 0 and step.self_cpu_memory_usage == -4096  # freed inside it, outside any op
    table = prof.key_averages().table(sort_by="self_cpu_memory_usage")
    assert "Self CPU Mem" in table and "4.00 Kb" in table and "-4.00 Kb" in table
    with profile() as plain:
        torch.mm(a, a)
    assert all(e.cpu_memory_usage == 0 for e in plain.events())
    assert "CPU Mem" not in plain.key_averages().table()


def test_ops_on_another_thread_carry_that_thread():
    seen = {}

    def work():
        seen["tid"] = threading.get_native_id()
        torch.mm(torch.randn(2, 2), torch.randn(2, 2))

    with profile() as prof:
        t = threading.Thread(target=work)
        t.start()
        t.join()
        torch.mm(torch.randn(2, 2), torch.randn(2, 2))
    threads = {e.thread for e in prof.events() if e.name == "aten::mm"}
    assert threads == {seen["tid"], threading.get_native_id()}


def test_two_profiles_at_once_both_see_the_ops_inside_them():
    a = torch.randn(3, 3)
    with profile() as outer:
        torch.mm(a, a)
        with profile() as inner:
            torch.relu(a)
        torch.mm(a, a)
    assert [e.name for e in inner.events()] == ["aten::relu"]
    assert [e.name for e in outer.events()] == ["aten::mm", "aten::relu", "aten::mm"]


def profiled_collectives():
    """On each rank: a profile of an all_reduce, an async all_gather and a barrier holds PyTorch's events for
    them, the call (c10d::allreduce_) and the work from launch to completion (gloo:all_reduce), on the calling
    thread."""
    import trainrun.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(4) * (dist.get_rank() + 1)
    with profile() as prof:
        dist.all_reduce(t)
        out = [torch.zeros(4) for _ in range(2)]
        dist.all_gather(out, t, async_op=True).wait()
        dist.barrier()
    assert t.tolist() == [3.0] * 4
    names = [e.name for e in prof.events()]
    for expected in ("c10d::allreduce_", "gloo:all_reduce", "c10d::allgather_", "gloo:all_gather", "c10d::barrier"):
        assert expected in names, (expected, names)
    work = next(e for e in prof.events() if e.name == "gloo:all_reduce")
    assert work.thread == threading.get_native_id() and work.cpu_time_total > 0
    dist.destroy_process_group()


def test_collectives_are_profiled_as_pytorch_names_them(ranks):
    ranks.run_function(2, profiled_collectives)


def profiled_fsdp_and_ddp():
    """FSDP2 and DDP mark their phases as PyTorch's do (FSDP::pre_forward, FSDP::all_gather,
    FSDP::post_backward_reduce; DistributedDataParallel.forward), and their collectives are events (issued on
    the process group's thread when asynchronous)."""
    import trainrun.distributed as dist
    from trainrun.distributed.fsdp import fully_shard
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 4))
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    x = torch.randn(3, 8)
    with profile() as prof:
        ddp(model(x)).sum().backward()
    names = {e.name for e in prof.events()}
    for expected in ("FSDP::pre_forward", "FSDP::post_forward", "FSDP::all_gather", "FSDP::post_backward_reduce",
                     "c10d::allgather_into_tensor_coalesced_", "c10d::reduce_scatter_tensor_coalesced_",
                     "DistributedDataParallel.forward", "gloo:all_reduce"):
        assert expected in names, (expected, sorted(names))
    dist.destroy_process_group()


def test_fsdp_and_ddp_mark_their_phases(ranks):
    ranks.run_function(2, profiled_fsdp_and_ddp)
