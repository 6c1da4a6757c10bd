"""torch.cond with a tensor pred inside recordings, as torch's higher-order cond: one node of the program
(torch.ops.higher_order.cond in the graph) that reads pred and runs the branch it picks at every replay, so a
compiled call and an exported program take either branch by the values they are given, with eager's gradients;
an AOT package refuses it (its branches are Python), naming it."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        def true_fn(t):
            return self.lin(t).tanh(), t.sum()

        def false_fn(t):
            return (t - 1) * t, t.mean()

        y, s = torch.cond(x.sum() > 0, true_fn, false_fn, (x,))
        return y * s


INPUTS = ([1., 2., 3.], [-1., -2., 0.5], [2., 2., 2.], [-3., 1., 1.])


def test_a_compiled_cond_takes_the_branch_each_call_gives_with_eagers_gradients():
    m = Branchy()
    compiled = torch.compile(m)
    for values in INPUTS:
        a, b = torch.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
        m.zero_grad()
        compiled(a).sum().backward()
        got_w = None if m.lin.weight.grad is None else m.lin.weight.grad.clone()
        m.zero_grad()
        want = m(b)
        want.sum().backward()
        assert torch.allclose(compiled(a), want.detach(), atol=1e-6), values
        assert torch.allclose(a.grad, b.grad, atol=1e-6), values
        assert (got_w is None) == (m.lin.weight.grad is None), "only the true branch reaches the weights"
        if got_w is not None:
            assert torch.allclose(got_w, m.lin.weight.grad, atol=1e-6)
    assert compiled._compiled.replays == 2 * len(INPUTS) - 1, "one recording serves both branches"


def test_an_exported_cond_is_one_node_running_either_branch():
    m = Branchy()
    ep = torch.export.export(m, (torch.ones(3),))
    conds = [n for n in ep.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert len(conds) == 1 and "torch.ops.higher_order.cond(" in ep.graph_module.code
    for values in INPUTS:
        x = torch.tensor(values)
        assert torch.allclose(ep.module()(x), m(x), atol=1e-6), values
    with pytest.raises(ValueError, match="aot_compile: the program has a torch.cond"):
        torch.aot_compile(ep, "unused.aot")


def test_an_exported_cond_with_a_dynamic_batch():
    class Rows(nn.Module):
        def forward(self, x):
            return torch.cond(x.mean() > 0, lambda t: t * 2, lambda t: t.abs(), (x,))

    ep = torch.export.export(Rows(), (torch.ones(4, 3),),
                             dynamic_shapes={"x": {0: torch.export.Dim("batch", max=32)}})
    for x in (torch.randn(7, 3) + 5, torch.randn(9, 3) - 5):
        assert torch.allclose(ep.module()(x), Rows()(x))


def test_the_branches_must_agree():
    f = torch.compile(lambda x: torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: "no", (x,)))
    with pytest.raises(RuntimeError, match="a branch must return a tensor"):
        f(-torch.ones(2))
