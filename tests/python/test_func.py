"""torch.func over trainrun's autograd: grad (argnums, has_aux; composed: grad of grad, and a gradient that stays
differentiable when its input requires grad), grad_and_value, vjp, jacrev, vmap (in_dims/out_dims over tuples,
None dims, nested results; torch.vmap) and functional_call; per-sample gradients by vmap(grad(loss)) over
functional_call equal the gradients of each sample's loss, and the values match functorch 1.13 where installed;
autograd.grad gives None for an unused input, as PyTorch's."""
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
from trainrun.func import functional_call, grad, grad_and_value, jacrev, vjp, vmap  # noqa: E402


def test_grad_and_its_compositions():
    x = torch.tensor([1.0, 2.0])
    cube = lambda a: (a ** 3).sum()  # noqa: E731
    g = grad(cube)(x)
    assert g.tolist() == [3.0, 12.0] and g.grad_fn is None
    assert grad(lambda a: grad(cube)(a).sum())(x).tolist() == [6.0, 12.0], "grad of grad"
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    grad(cube)(w).sum().backward()
    assert w.grad.tolist() == [6.0, 12.0], "the gradient of an input that requires grad is differentiable"
    ga, gb = grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, x * 3)
    assert ga.tolist() == [3.0, 6.0] and gb.tolist() == [1.0, 2.0]
    g, aux = grad(lambda a: ((a ** 2).sum(), a.mean()), has_aux=True)(x)
    assert g.tolist() == [2.0, 4.0] and aux.item() == 1.5 and aux.grad_fn is None
    g, value = grad_and_value(cube)(x)
    assert g.tolist() == [3.0, 12.0] and value.item() == 9.0
    d = grad(lambda p: (p["w"] * p["b"]).sum())({"w": x, "b": torch.ones(2)})
    assert d["w"].tolist() == [1.0, 1.0] and d["b"].tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
        grad(lambda a: a * 2)(x)


def test_vjp_and_jacrev():
    x = torch.tensor([1.0, 2.0, 3.0])
    out, fn = vjp(lambda a: a ** 2, x)
    assert out.tolist() == [1.0, 4.0, 9.0] and fn(torch.ones(3))[0].tolist() == [2.0, 4.0, 6.0]
    jac = jacrev(lambda a: a.sin() * a.sum())(x)
    assert torch.equal(jacrev(lambda a: a.sin() * a.sum(), chunk_size=1)(x), jac)  # (PyTorch's memory bound)
    want = torch.diag(x.cos() * x.sum()) + x.sin().unsqueeze(1) * torch.ones(3, 3)
    assert jac.shape == (3, 3) and torch.allclose(jac, want, atol=1e-6)


def test_vmap_shapes_dims_and_structures():
    a, b = torch.randn(4, 3), torch.randn(3)
    assert torch.allclose(vmap(lambda u, v: u * v, in_dims=(0, None))(a, b), a * b)
    assert torch.allclose(vmap(torch.sum)(a), a.sum(1)) and torch.allclose(torch.vmap(torch.sum)(a), a.sum(1))
    assert torch.allclose(vmap(lambda u: u * 2, in_dims=1, out_dims=1)(a), a * 2)
    s, p = vmap(lambda u: (u.sum(), u.prod()))(a)
    assert s.shape == (4,) and torch.allclose(p, a.prod(1))
    assert vmap(vmap(lambda u: u + 1))(torch.zeros(2, 3)).tolist() == [[1.0] * 3] * 2
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        vmap(lambda u, v: u + v)(torch.ones(2, 3), torch.ones(3, 3))
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(torch.sum, randomness="sometimes")


def test_per_sample_gradients_with_functional_call():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    params = {k: v.detach() for k, v in model.named_parameters()}
    xs, ys = torch.randn(5, 3), torch.randn(5, 1)

    def loss(p, x, y):
        return ((functional_call(model, p, (x.unsqueeze(0),)) - y) ** 2).sum()

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(params, xs, ys)
    for i in range(5):
        model.zero_grad()
        ((model(xs[i:i + 1]) - ys[i]) ** 2).sum().backward()
        for name, p in model.named_parameters():
            assert torch.allclose(per_sample[name][i], p.grad, atol=1e-6), (name, i)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in params.items()), "parameters put back"
    with pytest.raises(AttributeError, match="no parameter or buffer 'nope'"):
        functional_call(model, {"nope": torch.ones(1)}, (xs,))


def test_autograd_grad_gives_none_for_an_unused_input():
    a, b = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    ga, gb = torch.autograd.grad((a * 2).sum(), [a, b], allow_unused=True)
    assert ga.tolist() == [2.0, 2.0] and gb is None
    assert torch.autograd.grad((a * 2).sum(), [a, b], materialize_grads=True)[1].tolist() == [0.0, 0.0]


@needs_torch
def test_values_match_functorch():
    functorch = pytest.importorskip("functorch")
    peer.manual_seed(0)
    x = peer.randn(4, 3)
    f_peer = lambda a: (a.sin() * a).sum()  # noqa: E731
    f_ours = lambda a: (a.sin() * a).sum()  # noqa: E731
    ours_x = torch.tensor(x.tolist())
    assert torch.allclose(vmap(grad(f_ours))(ours_x), torch.tensor(functorch.vmap(functorch.grad(f_peer))(x).tolist()),
                          atol=1e-6)
    assert torch.allclose(jacrev(lambda a: a.sin() * a)(ours_x[0]),
                          torch.tensor(functorch.jacrev(lambda a: a.sin() * a)(x[0]).tolist()), atol=1e-6)
