"""torch.compile(backend=callable) as PyTorch users write custom backends: the backend is handed each recording as
a torch.fx GraphModule (placeholders for the arguments then the module's tensors, aten call_function nodes, an
output) with the call's input tensors, and replays call what it returns; torch._dynamo.testing.CompileCounter
counts recordings and ops; torch._dynamo.utils.counters counts frames, graphs, breaks and recompiles;
torch._dynamo.eval_frame.OptimizedModule is what compile(module) returns; ExportedProgram's module() is a
GraphModule, and it lists its parameters and buffers."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun._dynamo.testing import CompileCounter  # noqa: E402
from trainrun._dynamo.utils import counters  # noqa: E402


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_a_backend_is_handed_the_recorded_graph_and_the_inputs_and_replays_call_what_it_returns():
    handed, calls = [], []

    def backend(gm, example_inputs):
        handed.append((gm, example_inputs))

        def run(*args):
            calls.append(len(args))
            return gm(*args)
        return run

    m = mlp()
    cm = torch.compile(m, backend=backend)
    x = torch.randn(3, 4)
    first = cm(x)
    assert len(handed) == 1 and calls == [5], "the first call records, then runs the backend's callable (PyTorch's)"
    gm, example_inputs = handed[0]
    assert isinstance(gm, torch.fx.GraphModule) and isinstance(gm, nn.Module)
    assert [t.shape for t in example_inputs] == [(3, 4), (8, 4), (8,), (2, 8), (2,)]
    assert example_inputs[0] is x and example_inputs[1] is m[0].weight
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    assert placeholders == ["L_arg0_", "L_self_0_weight_", "L_self_0_bias_", "L_self_2_weight_", "L_self_2_bias_"]
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.aten.addmm.default) == 2 and torch.ops.aten.relu.default in targets
    assert gm.code.startswith("def forward(self, L_arg0_, L_self_0_weight_"), gm.code
    assert "torch.ops.aten.addmm.default(L_self_0_bias_, L_arg0_" in gm.print_readable(print_output=False)
    second = cm(x)
    assert calls == [5, 5], "a replay calls the backend's callable with every input tensor"
    assert torch.allclose(first, m(x)) and torch.allclose(second, m(x))
    assert len(handed) == 1, "a replay does not hand the graph again"
    cm(torch.randn(6, 4))
    assert len(handed) == 2 and handed[1][1][0].shape == (6, 4), "a new shape is a new recording"


def test_training_through_a_backends_callable_gives_eagers_gradients():
    m, ref = mlp(), mlp()
    cm = torch.compile(m, backend=lambda gm, inputs: gm.forward)
    x = torch.randn(5, 4)
    for _ in range(3):
        m.zero_grad()
        cm(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)


def test_what_the_backend_returns_is_what_runs():
    def zeroing(gm, example_inputs):
        return lambda *args: tuple(out * 0 for out in gm(*args))

    f = torch.compile(lambda a: a.sin() + 1, backend=zeroing)
    x = torch.randn(4)
    assert torch.equal(f(x), torch.zeros(4)), "the first call's result is the backend's, as in PyTorch"
    assert torch.equal(f(x), torch.zeros(4)), "replays run the backend's callable"


def test_a_first_call_with_effects_keeps_its_recorded_result():
    """A recording that writes its inputs (a buffer's update) or draws random numbers ran once already while it
    was recorded; running the backend's callable too would repeat that, so the first call returns the recorded
    result and the callable runs from the second call on."""
    def zeroing(gm, example_inputs):
        return lambda *args: tuple(out * 0 for out in gm(*args))

    def step(a, counter):
        counter.add_(1)
        return a * 2

    f = torch.compile(step, backend=zeroing)
    counter, x = torch.zeros(1), torch.ones(2)
    assert f(x, counter).tolist() == [2.0, 2.0] and counter.item() == 1.0
    assert f(x, counter).tolist() == [0.0, 0.0] and counter.item() == 2.0
    noisy = torch.compile(lambda a: torch.nn.functional.dropout(a, 0.5), backend=zeroing)
    assert noisy(torch.ones(100)).sum().item() > 0


def test_a_backend_that_returns_no_callable_is_named():
    def broken(gm, example_inputs):
        return 42

    f = torch.compile(lambda a: a + 1, backend=broken)
    with pytest.raises(TypeError, match="backend 'broken' returned a int; a backend must return a callable"):
        f(torch.ones(2))


def test_compile_counter_counts_recordings_and_their_ops():
    cnt = CompileCounter()

    @torch.compile(backend=cnt)
    def f(a):
        return torch.sin(a) * 2

    f(torch.randn(3))
    f(torch.randn(3))
    assert cnt.frame_count == 1 and cnt.op_count >= 2, (cnt.frame_count, cnt.op_count)
    one = cnt.op_count
    f(torch.randn(5))
    assert cnt.frame_count == 2 and cnt.op_count == 2 * one
    cnt.clear()
    assert (cnt.frame_count, cnt.op_count) == (0, 0)


def test_counters_count_frames_graphs_breaks_and_recompiles():
    counters.clear()

    @torch.compile
    def branchy(a):
        return a + 1 if a.sum() > 0 else a - 1

    branchy(torch.ones(2))
    assert counters["frames"]["total"] == 1 and counters["frames"]["ok"] == 0
    (reason, count), = counters["graph_break"].items()
    assert "item()" in reason and count == 1

    cnt = CompileCounter()
    f = torch.compile(lambda a: a.exp() + a, backend=cnt)
    f(torch.ones(2)), f(torch.ones(2)), f(torch.ones(3))
    assert counters["frames"]["ok"] == 2 and counters["stats"]["unique_graphs"] == 2
    assert counters["stats"]["calls_captured"] == cnt.op_count == 4 and counters["recompiles"]["total"] == 1
    counters.clear()
    assert not counters["frames"]


def test_optimized_module_is_one_class():
    from trainrun._dynamo.eval_frame import OptimizedModule
    a, b = torch.compile(nn.Linear(2, 2)), torch.compile(nn.ReLU())
    assert isinstance(a, OptimizedModule) and type(a) is type(b)
    assert not isinstance(nn.Linear(2, 2), OptimizedModule)


def test_a_backend_that_edits_the_graph_gets_what_it_edited_on_replays():
    torch.manual_seed(0)
    model = mlp()
    x = torch.randn(2, 4)

    def relu_to_sigmoid(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target == torch.ops.aten.relu.default:
                node.target = torch.ops.aten.sigmoid.default
        gm.recompile()
        return gm.forward

    compiled = torch.compile(model, backend=relu_to_sigmoid)
    compiled(x)  # (the recording call's result is the eager one: it ran the model)
    hidden = torch.sigmoid(model[0](x))
    assert torch.allclose(compiled(x), model[2](hidden), atol=1e-6)


def test_an_exported_program_lists_its_parameters_and_buffers():
    m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).eval()
    ep = torch.export.export(m, (torch.randn(2, 4),))
    names = [n for n, _ in ep.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.weight", "1.bias"]
    # (all the module's buffers, as torch.export's: num_batches_tracked, unread in eval, too)
    assert [n for n, _ in ep.named_buffers()] == ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
    assert all(torch.equal(p, q) for p, q in zip(ep.parameters(), m.parameters()))
    assert len(list(ep.buffers())) == 3
    x = torch.randn(2, 4)
    assert torch.allclose(torch.export.export_for_training(m, (x,)).module()(x), m(x))


def test_dynamo_optimize_is_compile_with_a_backend():
    cnt = CompileCounter()
    f = torch._dynamo.optimize(cnt)(lambda a: a.relu() * 2)
    x = torch.randn(5)
    assert torch.equal(f(x), x.relu() * 2) and torch.equal(f(x), x.relu() * 2)
    assert cnt.frame_count == 1
    g = torch._dynamo.optimize("inductor", nopython=True)(lambda a: a + 1 if a.sum() > 0 else a)
    with pytest.raises(torch._dynamo.exc.Unsupported, match="item\\(\\)"):
        g(torch.ones(2))


def test_export_tutorial_surface():
    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 3)

        def forward(self, x, y):
            return torch.nn.functional.relu(self.lin(x + y), inplace=True)

    ep = torch.export.export(TwoInputs(), (torch.randn(4, 6), torch.randn(4, 6)))
    text = str(ep.graph_module)
    assert text.startswith("GraphModule(") and "def forward(self, p_lin_weight, p_lin_bias, x, y):" in text, text
    assert ep.run_decompositions(torch.export.default_decompositions()) is not None
    batch = torch.export.Dim("batch", min=3, max=10)
    with pytest.raises(torch._dynamo.exc.UserError, match="so batch = 2, outside Dim\\('batch', min=3, max=10\\)"):
        torch.export.export(TwoInputs(), (torch.randn(2, 6), torch.randn(2, 6)),
                            dynamic_shapes={"x": {0: batch}, "y": {0: batch}})


def test_a_cpp_layers_exported_input_is_named_input_as_torchs():
    ep = torch.export.export(nn.Linear(2, 3), (torch.randn(1, 2),))
    assert ep.graph_signature.user_inputs == ["input"]
    assert ep.graph_module.code.startswith("def forward(self, p_weight, p_bias, input):")
    with pytest.raises(ValueError, match="input 'input' is trainrun.float64"):
        ep.module()(torch.randn(1, 2).double())
