"""Module backward hooks as PyTorch's: register_full_backward_pre_hook sees (and may replace) grad_output,
register_full_backward_hook sees grad_input (None where an input needs no gradient) and grad_output and may replace
grad_input; the gradients equal PyTorch 1.13's for the same module and data; a handle removes a hook; a compiled
call of a hooked module runs eagerly, so the hooks run on every call."""
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x, scale, y):
        return self.lin(x) * scale + y.sum(), self.lin(y)


def _shapes(grads):
    return [None if g is None else tuple(g.shape) for g in grads]


def test_full_hooks_see_input_and_output_gradients_and_may_replace_them():
    torch.manual_seed(0)
    model, seen = TwoInputs(), []
    model.register_full_backward_pre_hook(lambda m, go: seen.append(("pre", _shapes(go))))
    handle = model.register_full_backward_hook(lambda m, gi, go: seen.append(("full", _shapes(gi), _shapes(go))))
    x, y = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3)
    a, b = model(x, 2.0, y)
    (a.sum() + b.sum()).backward()
    assert seen == [("pre", [(4, 2), (4, 2)]), ("full", [(4, 3), None, None], [(4, 2), (4, 2)])]
    handle.remove()
    seen.clear()
    a, b = model(x, 2.0, y)
    (a.sum() + b.sum()).backward()
    assert seen == [("pre", [(4, 2), (4, 2)])], "the removed hook no longer runs"

    zeroing = nn.Linear(3, 2)
    zeroing.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    x.grad = None
    zeroing(x).sum().backward()
    assert torch.equal(x.grad, torch.zeros(4, 3)), "grad_input replaced"
    doubling = nn.Linear(3, 2)
    doubling.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
    x.grad = None
    doubling(x).sum().backward()
    assert torch.allclose(x.grad, 2 * torch.ones(4, 2) @ doubling.weight), "grad_output replaced"
    with pytest.raises(RuntimeError, match="invalid number of grad_input"):
        bad = nn.Linear(3, 2)
        bad.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
        bad(x).sum().backward()


def test_without_inputs_that_need_gradients_the_hook_runs_with_none():
    model, seen = nn.Linear(3, 2), []
    model.register_full_backward_hook(lambda m, gi, go: seen.append((gi, _shapes(go))))
    model(torch.randn(4, 3)).sum().backward()
    assert seen == [((None,), [(4, 2)])]


def test_a_compiled_hooked_module_runs_the_hooks_each_call():
    model, calls = nn.Linear(3, 2), []
    model.register_full_backward_hook(lambda m, gi, go: calls.append(1))
    compiled = torch.compile(model)
    x = torch.randn(4, 3, requires_grad=True)
    for _ in range(3):
        compiled(x).sum().backward()
    assert len(calls) == 3 and "hooks" in compiled.explain()


@needs_torch
def test_hook_gradients_match_pytorch():
    peer.manual_seed(0)
    theirs = peer.nn.Sequential(peer.nn.Linear(3, 4), peer.nn.Tanh(), peer.nn.Linear(4, 2))
    ours = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    ours.load_state_dict({k: torch.tensor(v.tolist()) for k, v in theirs.state_dict().items()})
    got, want = [], []
    ours[1].register_full_backward_hook(lambda m, gi, go: got.append((gi[0].tolist(), go[0].tolist())))
    theirs[1].register_full_backward_hook(lambda m, gi, go: want.append((gi[0].tolist(), go[0].tolist())))
    x = peer.randn(5, 3)
    theirs(x.clone().requires_grad_()).pow(2).sum().backward()
    ours(torch.tensor(x.tolist(), requires_grad=True)).pow(2).sum().backward()
    assert len(got) == len(want) == 1
    for g, w in zip(got[0], want[0]):
        assert torch.allclose(torch.tensor(g), torch.tensor(w), atol=1e-6)
