"""torch.autograd.graph.register_multi_grad_hook: "all" mode calls the hook once per backward pass with every
tensor's gradient (None for one the pass did not reach), "any" mode once with the first gradient; state resets
between passes; remove() takes the hooks off; bad arguments are refused by name."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun.autograd.graph import register_multi_grad_hook  # noqa: E402


def as_lists(grads):
    return [None if g is None else g.tolist() for g in grads]


def test_all_mode_sees_every_gradient_once_per_pass():
    a, b, c = (torch.ones(2, requires_grad=True) for _ in range(3))
    seen = []
    handle = register_multi_grad_hook([a, b, c], lambda grads: seen.append(as_lists(grads)))
    (a * 2 + b * 3 + c).sum().backward()
    assert seen == [[[2.0, 2.0], [3.0, 3.0], [1.0, 1.0]]]
    (a * 4 + b).sum().backward()  # c takes no part: its gradient is None, the hook runs at the pass's end
    assert seen[1] == [[4.0, 4.0], [1.0, 1.0], None]
    handle.remove()
    (a + b + c).sum().backward()
    assert len(seen) == 2


def test_all_mode_runs_when_the_last_gradient_arrives():
    """Not at the end of the pass: as soon as the last of the tensors has its gradient (a hook registered on that
    tensor afterwards runs after it)."""
    a = torch.ones(3, requires_grad=True)
    hidden = a * 2
    order = []
    register_multi_grad_hook([hidden, a], lambda grads: order.append(("multi", as_lists(grads))))
    a.register_hook(lambda g: order.append(("a", g.tolist())))
    hidden.sum().backward()
    assert order == [("multi", [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]), ("a", [2.0, 2.0, 2.0])]


def test_any_mode_once_per_pass():
    a, b = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    firsts = []
    with register_multi_grad_hook((a, b), lambda g: firsts.append(g.tolist()), mode="any"):
        (a * 5 + b * 5).sum().backward()
        (b * 7).sum().backward()
    assert firsts == [[5.0, 5.0], [7.0, 7.0]]
    (a + b).sum().backward()
    assert len(firsts) == 2  # (removed on leaving the with block)


def test_bad_arguments():
    a = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="mode to be one of"):
        register_multi_grad_hook([a], print, mode="some")
    with pytest.raises(RuntimeError, match="must require grad"):
        register_multi_grad_hook([a, torch.ones(2)], print)
