"""torch.autograd.graph.saved_tensors_hooks: what nodes save goes through pack and comes back through unpack
(the gradients are the ones without hooks), the innermost hooks apply and a node keeps its own, save_on_cpu,
disable_saved_tensors_hooks, the version check of a packed tensor, and an unpack that returns no tensor."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks  # noqa: E402


def _grads(model, x, context):
    model.zero_grad()
    with context:
        loss = model(x).pow(2).sum()
    loss.backward()
    return [p.grad.clone() for p in model.parameters()]


def test_pack_and_unpack_see_every_saved_tensor_and_gradients_are_unchanged():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return ("kept", t.detach().clone())  # (a copy: the hook owns what it keeps)

    def unpack(entry):
        unpacked.append(entry[0])
        return entry[1]

    expected = _grads(model, x, torch.enable_grad())
    got = _grads(model, x, saved_tensors_hooks(pack, unpack))
    assert all(torch.allclose(a, b) for a, b in zip(expected, got))
    assert packed and (3, 4) in packed and len(unpacked) == len(packed)
    assert all(torch.allclose(a, b) for a, b in zip(expected, _grads(model, x, save_on_cpu())))


def test_the_innermost_hooks_apply_and_a_node_keeps_its_own():
    seen = []
    x = torch.randn(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: seen.append("outer") or t, lambda t: t):
        a = x.sin()
        with saved_tensors_hooks(lambda t: seen.append("inner") or t, lambda t: seen.append("unpack inner") or t):
            b = a.cos()
    assert seen == ["outer", "inner"]
    (a + b).sum().backward()  # (outside any hooks: each node unpacks with the hooks it saved with)
    assert "unpack inner" in seen
    assert torch.allclose(x.grad, x.cos() * (1 - x.sin().sin()))


def test_disabled_hooks_a_modified_packed_tensor_and_a_bad_unpack_are_refused():
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="no saving in here"):
        with disable_saved_tensors_hooks("no saving in here"):
            (x * x).sum()
    z = x * 1
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        w = z.sin()
    z.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation: a tensor of shape \\[3\\] saved by "
                                           "SinBackward"):
        w.sum().backward()
    with saved_tensors_hooks(lambda t: 1, lambda packed: packed):
        q = (x * x).sum()
    with pytest.raises(TypeError, match="the unpack hook must return a tensor, got int"):
        q.backward()
    with pytest.raises(TypeError, match="must be callable"):
        saved_tensors_hooks(None, None)
    torch.autograd.graph.increment_version(x)
    assert x._version >= 1


def test_grad_fn_is_a_node_with_next_functions_and_hooks():
    x = torch.ones(2, requires_grad=True)
    w = torch.full([2], 3.0, requires_grad=True)
    y = (x * w).sin().sum()
    node = y.grad_fn
    assert isinstance(node, torch.autograd.graph.Node) and node.name().startswith("SumBackward")
    (sin_node, slot), = node.next_functions
    assert slot == 0 and sin_node.name().startswith("SinBackward")
    leaves = sin_node.next_functions[0][0].next_functions
    assert [n.name() for n, _ in leaves] == ["AccumulateGrad", "AccumulateGrad"]
    assert torch.equal(leaves[1][0].variable, w) and x.grad_fn is None
    with pytest.raises(TypeError, match="only AccumulateGrad"):
        node.variable
    seen = []
    handle = node.register_prehook(lambda grad_outputs: seen.append("pre") or (grad_outputs[0] * 2,))
    sin_node.register_hook(lambda grad_inputs, grad_outputs: seen.append("post"))
    y.backward(retain_graph=True)
    assert seen == ["pre", "post"] and torch.allclose(x.grad, 2 * (x * w).cos() * w)
    handle.remove()
    x.grad = None
    y.backward()
    assert seen == ["pre", "post", "post"] and torch.allclose(x.grad, (x * w).cos() * w)
    assert node == y.grad_fn and hash(node) == hash(y.grad_fn) and "object at" in repr(node)
