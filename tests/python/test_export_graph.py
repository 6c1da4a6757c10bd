"""ExportedProgram.graph as a trainrun.fx Graph in torch.export's layout (placeholders p_/b_ then user inputs,
call_function nodes with torch.ops.aten targets, getitem for one result of several, an output node; users,
meta["val"], find_nodes, lint, printing), and ExportedProgram.module() holding the program's weights by name:
loading a state dict into it changes what the program computes."""
import operator

import pytest

from built_tree import ROOT  # noqa: F401

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.norm = nn.LayerNorm(8)
        self.fc2 = nn.Linear(8, 3)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        return torch.relu(self.fc2(self.norm(self.fc1(x)))) * self.scale


def _export():
    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(5, 4)
    return net, x, torch.export.export(net, (x,))


def test_the_graph_has_torch_exports_placeholders_calls_and_output():
    net, x, ep = _export()
    g = ep.graph
    assert isinstance(g, torch.fx.Graph) and ep.graph_module.graph is g and ep.module().graph is g
    assert ep.module().code == ep.graph_module.code and ep.module().code.startswith("def forward(self, p_fc1_weight")
    nodes = list(g.nodes)
    assert len(g.nodes) == len(nodes) and nodes[-1].op == "output" and nodes[-1] is g.output_node()
    names = [n.name for n in g.find_nodes(op="placeholder")]
    assert names == ["p_fc1_weight", "p_fc1_bias", "p_norm_weight", "p_norm_bias", "p_fc2_weight", "p_fc2_bias",
                     "b_scale", "x"]
    # Placeholders first, in that order, then the ops.
    assert [n.op for n in nodes[:len(names)]] == ["placeholder"] * len(names)
    assert all(n.op == "call_function" for n in nodes[len(names):-1])
    relu = g.find_nodes(op="call_function", target=torch.ops.aten.relu.default)
    assert len(relu) == 1 and relu[0].name == "relu"
    target = relu[0].target
    assert (target.__name__, target._opname, target.name()) == ("relu.default", "relu", "aten::relu")
    assert torch.ops.aten.add.Tensor.name() == "aten::add.Tensor"
    assert tuple(relu[0].meta["val"].shape) == (5, 3) and relu[0].meta["val"].dtype == torch.float32
    assert relu[0].meta["device"] == torch.device("cpu")
    # The output reads the last op; the op reads relu; relu's users are that op.
    (out,) = nodes[-1].args[0]
    assert relu[0] in out.all_input_nodes and out in relu[0].users
    assert tuple(out.meta["val"].shape) == (5, 3)
    # layer_norm gives (out, mean, rstd): only the output is read, through getitem.
    (ln,) = [n for n in nodes if n.op == "call_function" and n.name == "layer_norm"]
    readers = list(ln.users)
    assert len(readers) == 1 and readers[0].target is operator.getitem and readers[0].args == (ln, 0)
    g.lint()


def test_placeholders_follow_the_modules_order_not_the_order_of_use():
    class Reversed(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.ones(3))
            self.b = nn.Parameter(torch.ones(3))
            self.register_buffer("c", torch.ones(3))
            self.register_buffer("d", torch.ones(3))

        def forward(self, x):
            return ((x + self.d) * self.c + self.b) * self.a

    ep = torch.export.export(Reversed(), (torch.randn(3),))
    assert ep.graph_signature.parameters == ["a", "b"] and ep.graph_signature.buffers == ["c", "d"]
    assert [n.name for n in ep.graph.find_nodes(op="placeholder")] == ["p_a", "p_b", "b_c", "b_d", "x"]


def test_the_graph_prints_as_torch_fx_does():
    _, _, ep = _export()
    text = str(ep.graph)
    lines = text.splitlines()
    assert lines[0] == "graph():"
    assert lines[1] == "    %p_fc1_weight : [num_users=1] = placeholder[target=p_fc1_weight]"
    assert any("= call_function[target=torch.ops.aten.relu.default](args = (%" in line for line in lines), text
    assert "operator.getitem" in text
    assert lines[-1].startswith("    return (") and lines[-1].endswith(",)")
    ep.graph.print_tabular()
    # print(ep): torch's layout (the module's code with each value's dtype and shape), then the program as run.
    shown = str(ep)
    assert shown.startswith("ExportedProgram:\n    class GraphModule(torch.nn.Module):\n        def forward(self, "
                            'p_fc1_weight: "f32[8, 4]", '), shown
    assert '            relu: "f32[5, 3]" = torch.ops.aten.relu.default(' in shown, shown
    assert "Range constraints: {}" in shown and "As run (x): " in shown


def test_a_graph_target_without_a_python_function_says_so_when_called():
    from trainrun.export._graph import _target
    assert _target("op", "relu") is not None and _target("op", "relu")(torch.tensor([-1.0, 2.0])).tolist() == [0, 2]
    unbound = _target("op", "no_such_op_anywhere")
    assert repr(unbound) == "aten.no_such_op_anywhere.default"
    with pytest.raises(NotImplementedError, match="aten.no_such_op_anywhere"):
        unbound(torch.ones(1))


def test_module_holds_the_weights_by_name_and_runs_with_what_is_loaded():
    net, x, ep = _export()
    mod = ep.module()
    assert [n for n, _ in mod.named_parameters()] == ["fc1.weight", "fc1.bias", "norm.weight", "norm.bias",
                                                      "fc2.weight", "fc2.bias"]
    assert [n for n, _ in mod.named_buffers()] == ["scale"]
    assert set(mod.state_dict()) == set(net.state_dict())
    assert torch.allclose(mod(x), net(x))
    # New weights, loaded in place: the program reads them.
    torch.manual_seed(1)
    other = Net().eval()
    mod.load_state_dict(other.state_dict())
    assert torch.allclose(mod(x), other(x), atol=1e-6)
    assert torch.allclose(ep.module()(x), other(x), atol=1e-6)  # (the program's weights: one set, as in torch)


class Counting(nn.Module):
    """A forward that writes a buffer, next to weights it never reads."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))
        self.register_buffer("scratch", torch.zeros(1), persistent=False)
        self.lin = nn.Linear(2, 2)
        self.unused = nn.Linear(2, 2)

    def forward(self, x):
        self.count.add_(1)
        return self.lin(x) * 2


def test_export_leaves_the_module_as_it_was_and_the_program_writes_its_own_buffer():
    m = Counting()
    ep = torch.export.export(m, (torch.randn(2),))
    assert torch.equal(m.count, torch.zeros(1))  # (the recording's add_ was put back)
    assert torch.equal(ep.state_dict["count"], torch.zeros(1))
    gm = ep.module()
    gm(torch.randn(2))
    gm(torch.randn(2))
    assert torch.equal(gm.count, torch.full((1,), 2.0)) and torch.equal(m.count, torch.zeros(1))
    sig = ep.graph_signature
    assert [(s.kind, s.target) for s in sig.output_specs] == [
        (torch.export.OutputKind.BUFFER_MUTATION, "count"), (torch.export.OutputKind.USER_OUTPUT, None)]
    assert list(sig.buffers_to_mutate.values()) == ["count"]


def test_the_state_dict_holds_every_weight_also_those_unread_and_survives_save_load(tmp_path):
    m = Counting()
    ep = torch.export.export(m, (torch.randn(2),))
    # As torch.export: the module's parameters and persistent buffers, in its order (not the non-persistent one).
    assert list(ep.state_dict) == ["lin.weight", "lin.bias", "unused.weight", "unused.bias", "count"]
    assert ep.graph_signature.parameters == ["lin.weight", "lin.bias", "unused.weight", "unused.bias"]
    placeholders = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
    assert placeholders == ["p_lin_weight", "p_lin_bias", "p_unused_weight", "p_unused_bias", "b_count", "x"]
    assert not ep.graph.find_nodes(op="placeholder", target="p_unused_weight")[0].users
    torch.export.save(ep, tmp_path / "m.pt2")
    loaded = torch.export.load(tmp_path / "m.pt2")
    assert list(loaded.state_dict) == list(ep.state_dict)
    assert torch.equal(loaded.state_dict["unused.weight"], m.unused.weight)
    assert loaded.graph_signature.buffers_to_mutate == ep.graph_signature.buffers_to_mutate
    x = torch.randn(2)
    assert torch.allclose(loaded.module()(x), m(x))
