"""PyTorch 2.x's controls around torch.compile over trainrun's recordings: compiler.set_stance (force_eager runs
the Python every call; eager_on_recompile and fail_on_recompile replay what fits and run eagerly or raise for a
call that needs a new recording; as a call, a `with` block and a decorator), _dynamo.graph_break, list_backends,
_logging.set_logs(graph_breaks=, recompiles=), torch.cond in eager, compiled and exported code, and an exported
program's graph_module text."""
import logging

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun._compile import GraphBreakError, RecompileError  # noqa: E402


class _Runs:
    """How many times the Python of a function ran (an attribute of a plain object: not a container whose change
    would make the call run eagerly each time)."""

    def __init__(self):
        self.count = 0

    def __len__(self):
        return self.count


def _counting():
    runs = _Runs()

    def f(a):
        runs.count += 1  # (Python that a replay does not run)
        return a * 2 + 1

    return torch.compile(f), runs


def test_force_eager_runs_the_python_of_every_call_and_with_restores_the_stance():
    f, runs = _counting()
    x = torch.randn(3)
    f(x), f(x)
    assert len(runs) == 1 and f.replays == 1
    with torch.compiler.set_stance("force_eager"):
        assert torch.equal(f(x), x * 2 + 1) and torch.equal(f(x), x * 2 + 1)
    assert len(runs) == 3 and f.replays == 1
    f(x)
    assert len(runs) == 3 and f.replays == 2, "the default stance is back after the block"
    torch.compiler.set_stance("force_eager")
    try:
        f(x)
        assert len(runs) == 4
    finally:
        torch.compiler.set_stance("default")


def test_recompile_stances_replay_what_fits_and_run_eagerly_or_raise_for_the_rest():
    f, runs = _counting()
    x, y = torch.randn(3), torch.randn(5)
    f(x)
    with torch.compiler.set_stance("fail_on_recompile"):
        f(x)  # fits the recording
        with pytest.raises(RecompileError, match="Detected recompile when torch.compile stance is "
                                                 "'fail_on_recompile': .*<locals>.f was called with guards no "
                                                 "recording"):
            f(y)
    with torch.compiler.set_stance("eager_on_recompile"):
        assert torch.equal(f(y), y * 2 + 1) and torch.equal(f(y), y * 2 + 1)
        assert len(f._cache) == 1, "no recording was made for the new shape"
    f(y)
    assert len(f._cache) == 2

    @torch.compiler.set_stance("force_eager")
    def run_twice(a):
        return f(a), f(a)

    before = len(runs)
    run_twice(x)
    assert len(runs) == before + 2
    f(x)
    assert len(runs) == before + 2, "the decorator's stance holds only inside the function"
    with pytest.raises(RuntimeError, match="unknown stance 'fast'"):
        torch.compiler.set_stance("fast")


def test_graph_break_runs_the_call_eagerly_and_is_logged_and_recompiles_are_logged(caplog):
    def g(a):
        b = a + 1
        torch._dynamo.graph_break()
        return b * 3

    torch._logging.set_logs(graph_breaks=True, recompiles=True)
    try:
        compiled = torch.compile(g)
        with caplog.at_level(logging.DEBUG, logger="trainrun._dynamo"):
            x = torch.randn(4)
            assert torch.equal(compiled(x), (x + 1) * 3) and torch.equal(compiled(x), (x + 1) * 3)
            h = torch.compile(lambda a: a - 1)
            h(torch.randn(2)), h(torch.randn(3))
    finally:
        torch._logging.set_logs()
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Graph break in ") and "<locals>.g (it runs eagerly for these guards): "
               "torch._dynamo.graph_break() was called" in m for m in messages), messages
    assert sum(m.startswith("Recompiling function ") and "<lambda>: no recording of its 1" in m
               for m in messages) == 1, messages
    reason = torch._dynamo.explain(g)(torch.randn(2)).break_reasons[0]
    assert "torch._dynamo.graph_break()" in reason and reason.reason == str(reason) and reason.user_stack == []
    torch._dynamo.graph_break()  # outside a recording: nothing happens
    with pytest.raises(ValueError, match="unknown log 'graph_brakes'"):
        torch._logging.set_logs(graph_brakes=True)
    assert "inductor" in torch._dynamo.list_backends() and "eager" not in torch._dynamo.list_backends()
    assert "eager" in torch._dynamo.list_backends(exclude_tags=())
    assert torch._dynamo.is_compiling() is False


def test_cond_picks_its_branch_eagerly_compiled_and_exported():
    def f(x):
        return torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,))

    pos, neg = torch.ones(3), -torch.ones(3)
    assert torch.equal(f(pos), pos + 1) and torch.equal(f(neg), neg - 1)
    compiled = torch.compile(f)
    assert torch.equal(compiled(pos), pos + 1) and torch.equal(compiled(neg), neg - 1)
    assert torch.equal(torch.cond(True, lambda t: t * 2, lambda t: t, [pos]), pos * 2)

    class M(nn.Module):
        def forward(self, x):
            return f(x)

    ep = torch.export.export(M(), (pos,))  # (the cond is a node of the program: either branch runs from it)
    assert torch.equal(ep.module()(neg), neg - 1) and torch.equal(ep.module()(pos), pos + 1)
    with pytest.raises(RuntimeError, match="pred must be a bool or a tensor of one element, got a tensor of shape"):
        torch.cond(pos > 0, lambda t: t, lambda t: t, (pos,))
    with pytest.raises(RuntimeError, match="operands\\[0\\] is a float"):
        torch.cond(True, lambda t: t, lambda t: t, (1.0,))


def test_an_exported_programs_graph_module_prints_its_program():
    ep = torch.export.export(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), (torch.randn(2, 4),))
    gm = ep.graph_module
    assert gm.code.startswith("def forward(self, p_0_weight, p_0_bias, input):"), gm.code
    assert "= torch.ops.aten.addmm.default(" in gm.code and "torch.ops.aten.relu.default" in gm.code, gm.code
    readable = gm.print_readable(print_output=False)  # torch's layout: the class, forward with shapes annotated
    head = "class GraphModule(torch.nn.Module):\n    def forward(self, p_0_weight: \"f32[3, 4]\""
    assert readable.startswith(head), readable
    assert isinstance(gm, torch.fx.GraphModule) and isinstance(gm, nn.Module)
    x = torch.randn(2, 4)
    assert torch.equal(gm(x), ep.module()(x))
