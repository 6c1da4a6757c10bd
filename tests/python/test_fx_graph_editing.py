"""trainrun.fx graphs edited and run: an exported program's graph with a node inserted (inserting_after,
replace_all_uses_with) runs the edit after recompile() and equals eager; a transformer block and a CNN run node by
node equal their recorded programs; a graph built by hand (placeholder, get_attr, call_module, call_method,
call_function) runs in a GraphModule over a module or a dict; erase_node, eliminate_dead_code, Interpreter and
Transformer subclasses."""
import operator

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun.fx import Graph, GraphModule, Interpreter, Transformer  # noqa: E402


def test_an_edited_exported_graph_runs_after_recompile():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    gm = torch.export.export(model, (x,)).module()
    relu = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.relu.default)
    with gm.graph.inserting_after(relu):
        neg = gm.graph.call_function(torch.ops.aten.neg.default, (relu,))
    relu.replace_all_uses_with(neg)
    neg.update_arg(0, relu)  # (neg itself keeps reading relu)
    assert torch.allclose(gm(x), model(x), atol=1e-6)  # (not recompiled yet: the recorded program)
    code = gm.recompile()
    assert "torch.ops.aten.neg.default(relu)" in code and list(relu.users) == [neg]
    assert torch.allclose(gm(x), model[2](-torch.relu(model[0](x))), atol=1e-6)


@pytest.mark.parametrize("kind", ["block", "cnn"])
def test_programs_run_node_by_node_equal_their_recordings(kind):
    torch.manual_seed(0)
    if kind == "block":
        model, x = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval(), torch.randn(2, 5, 8)
    else:
        model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(8, 3)).eval()
        x = torch.randn(2, 1, 6, 6)
    gm = torch.export.export(model, (x,)).module()
    recorded = gm(x)
    gm.recompile()
    assert torch.allclose(gm(x), recorded, atol=1e-5)


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("factor", torch.tensor(2.0))


def _hand_built():
    g = Graph()
    x = g.placeholder("x")
    factor = g.get_attr("factor")
    h = g.call_module("lin", (x,))
    r = g.call_method("relu", (h,))
    out = g.call_function(operator.mul, (r, factor))
    unused = g.call_function(torch.sin, (x,))
    g.output(out)
    return g, unused


def test_a_hand_built_graph_runs_over_a_module_or_a_dict_and_dead_code_goes():
    root = Scale()
    g, unused = _hand_built()
    x = torch.randn(2, 3)
    expected = torch.relu(root.lin(x)) * 2
    gm = GraphModule(root, g)
    assert torch.allclose(gm(x), expected) and gm.lin is root.lin
    assert torch.allclose(GraphModule({"lin": root.lin, "factor": root.factor}, g)(x), expected)
    assert "self.lin(x)" in gm.code and "relu = lin.relu()" in gm.code
    assert g.eliminate_dead_code() and unused not in list(g.nodes)
    with pytest.raises(RuntimeError, match="still had 1 users"):
        g.erase_node(next(n for n in g.nodes if n.op == "call_module"))
    g.lint()


def test_interpreter_and_transformer_subclasses():
    root = Scale()
    g, _ = _hand_built()
    gm = GraphModule(root, g)
    x = torch.randn(2, 3)

    class Counting(Interpreter):
        def run_node(self, n):
            self.count = getattr(self, "count", 0) + 1
            return super().run_node(n)

    counter = Counting(gm)
    assert torch.allclose(counter.run(x), gm(x)) and counter.count == len(g.nodes)

    class MulToAdd(Transformer):
        def call_function(self, target, args, kwargs):
            return super().call_function(operator.add if target is operator.mul else target, args, kwargs)

    added = MulToAdd(gm).transform()
    assert torch.allclose(added(x), torch.relu(root.lin(x)) + 2)


def test_symbolic_trace_records_the_python_program_and_runs_it():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.param = nn.Parameter(torch.rand(2, 4))
            self.blocks = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
            self.norm = nn.LayerNorm(4)

        def forward(self, x, y):
            h = self.blocks(x + self.param) * 2 + y
            h = torch.nn.functional.gelu(self.norm(h))
            h = torch.cat([h, h.sin()], dim=-1)
            return h.view(h.shape[0], -1).mean(dim=1), h[:, 0]

    torch.manual_seed(0)
    net = Net()
    cat, gelu, call = torch.cat, torch.nn.functional.gelu, nn.Linear.__call__
    gm = torch.fx.symbolic_trace(net)
    assert torch.cat is cat and torch.nn.functional.gelu is gelu and nn.Linear.__call__ is call  # (put back)
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    assert all(torch.allclose(a, b) for a, b in zip(gm(x, y), net(x, y)))
    ops = [(n.op, n.target) for n in gm.graph.nodes]
    assert ("call_module", "blocks.0") in ops and ("call_module", "norm") in ops and ("get_attr", "param") in ops
    assert ("call_function", torch.cat) in ops and ("call_method", "sin") in ops
    assert "torch.nn.functional.gelu(norm)" in gm.code and "torch.cat([gelu, sin], dim = -1)" in gm.code

    def branchy(x):
        return x if x.sum() > 0 else -x

    with pytest.raises(torch.fx.TraceError, match="cannot be used as inputs to control flow"):
        torch.fx.symbolic_trace(branchy)
    traced = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    assert traced(torch.tensor([-1.0, 2.0])).tolist() == [1.0, 3.0]


def _wrapped_leaf(x):
    """A leaf for symbolic tracing (wrapped below): its Python body would not trace (a branch on the data)."""
    return x * 2 if float(x.sum()) > 0 else x


torch.fx.wrap(_wrapped_leaf)
torch.fx.wrap("len")


def test_fx_wrap_records_a_function_as_one_call():
    class UsesLeaf(torch.nn.Module):
        def forward(self, x):
            return _wrapped_leaf(x) + len(x)

    traced = torch.fx.symbolic_trace(UsesLeaf())
    calls = [n.target for n in traced.graph.nodes if n.op == "call_function"]
    assert _wrapped_leaf in calls and len in calls, calls
    x = torch.tensor([1.0, -3.0])
    assert torch.equal(traced(x), UsesLeaf()(x))
    assert _wrapped_leaf(x).tolist() == [1.0, -3.0] and len([1, 2]) == 2  # (outside tracing: the functions)
    with pytest.raises(NotImplementedError, match="top level of a module"):
        torch.fx.wrap(abs)
    # torch.fx.proxy.GraphAppendingTracer and torch.fx.node.Target, by the paths PyTorch's examples use
    tracer = torch.fx.proxy.GraphAppendingTracer(traced.graph)
    assert tracer.graph is traced.graph and torch.fx.node.Target is not None
