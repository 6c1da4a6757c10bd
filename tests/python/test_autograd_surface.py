"""Autograd surface PyTorch scripts use: trainrun.autograd.functional (jacobian, hessian, vjp, jvp, vhp, hvp with
tensor and tuple inputs and outputs) against PyTorch 1.13; register_post_accumulate_grad_hook (the
optimizer-in-backward idiom, with dicts keyed by parameters); retains_grad; a registered parameter or buffer is
one Python object however often it is read; f"{loss:.4f}" of a 0-dim tensor."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


def _cases(t):
    from importlib import import_module
    functional = import_module(t.__name__ + ".autograd.functional")
    x = t.tensor([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]])
    y = t.tensor([0.2, 0.4, -0.1])

    def two_outputs(a, b):
        return (a * b).sum(1), a.exp().mean()

    def scalar(a, b):
        return (a.tanh() * b).sum() + (a ** 3).sum()
    return {
        "jacobian": lambda: functional.jacobian(lambda a: (a ** 2).sin(), x),
        "jacobian, tuples": lambda: functional.jacobian(two_outputs, (x, y)),
        "jacobian, unused input": lambda: functional.jacobian(lambda a, b: a * 2, (y, y)),
        "hessian": lambda: functional.hessian(lambda a: (a ** 3).sum(), y),
        "hessian, tuple": lambda: functional.hessian(scalar, (x, y)),
        "vjp": lambda: functional.vjp(lambda a: (a ** 2).sin(), x, t.ones(2, 3)),
        "jvp": lambda: functional.jvp(lambda a: (a ** 2).sin(), x, t.ones(2, 3)),
        "vhp": lambda: functional.vhp(lambda a: (a ** 3).sum(), y, t.ones(3)),
        "hvp, tuple": lambda: functional.hvp(scalar, (x, y), (t.ones(2, 3), t.ones(3))),
    }


def _values(v):
    if isinstance(v, (tuple, list)):
        return [_values(t) for t in v]
    return np.array(v.detach().tolist())


def _close(a, b):
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a.shape == b.shape and np.allclose(a, b, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("name", list(_cases(torch)))
def test_autograd_functional_matches_pytorch(name):
    assert _close(_values(_cases(torch)[name]()), _values(_cases(peer)[name]()))


def test_autograd_functional_errors():
    from trainrun.autograd.functional import hessian, jacobian, vjp
    with pytest.raises(RuntimeError, match="independent of input 1"):
        jacobian(lambda a, b: a * 2, (torch.ones(2), torch.ones(2)), strict=True)
    with pytest.raises(RuntimeError, match="single Tensor with one element"):
        hessian(lambda a: a * 2, torch.ones(2))
    with pytest.raises(RuntimeError, match="v can only be None"):
        vjp(lambda a: a * 2, torch.ones(2))
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple"):
        jacobian(lambda a: a, [1.0])


def test_post_accumulate_grad_hooks_step_an_optimizer_per_parameter():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    reference = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    reference.load_state_dict(model.state_dict())
    optimizers = {p: torch.optim.SGD([p], lr=0.1) for p in model.parameters()}  # keyed by parameter

    def step(p):
        optimizers[p].step()
        optimizers[p].zero_grad()
    handles = [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
    x = torch.randn(5, 3)
    model(x).sum().backward()
    whole = torch.optim.SGD(reference.parameters(), lr=0.1)
    reference(x).sum().backward()
    whole.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p, q, atol=1e-6) and p.grad is None
    for h in handles:
        h.remove()
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())  # removed: gradients stay
    with pytest.raises(Exception, match="non-leaf tensors or tensors that do not require grad"):
        torch.ones(2).register_post_accumulate_grad_hook(lambda t: None)


def test_retains_grad_and_registered_tensors_are_one_object():
    a = torch.ones(2, requires_grad=True)
    b = a * 2
    assert not b.retains_grad and not a.retains_grad
    b.retain_grad()
    assert b.retains_grad and not a.retains_grad
    linear, norm = nn.Linear(2, 2), nn.BatchNorm1d(2)
    weight = linear.weight
    assert linear.weight is weight and next(linear.parameters()) is weight
    assert dict(linear.named_parameters())["weight"] is weight
    assert norm.running_mean is norm.running_mean
    names = {p: n for n, p in linear.named_parameters()}
    assert [names[p] for p in linear.parameters()] == ["weight", "bias"]


def test_format_of_a_zero_dim_tensor_is_its_numbers():
    loss = torch.tensor(1.23456)
    assert f"{loss:.2f}" == "1.23" and f"{torch.tensor(7):03d}" == "007"
    assert f"{torch.ones(2)}" == str(torch.ones(2))


def test_detach_in_place_and_integer_requires_grad_refusal():
    """Tensor.detach_() takes a tensor out of its graph in place; requires_grad_() on an integer tensor is
    PyTorch's RuntimeError."""
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    assert y.detach_() is y and not y.requires_grad and y.grad_fn is None and y.tolist() == [2.0, 2.0]
    (x * y).sum().backward()  # y is a constant now
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        torch.tensor([1, 2]).requires_grad_()


def test_a_saved_tensor_whose_memory_was_freed_is_an_error_not_a_crash():
    a, b = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    y = (a @ b).sum()
    a.untyped_storage().resize_(0)
    with pytest.raises(RuntimeError, match="shape \\[4, 4\\] saved for backward has no memory any more"):
        y.backward()
