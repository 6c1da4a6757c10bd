"""The rest of torch's top level (constants, in-place functions, *_scatter, gradient, cumulative_trapezoid,
gcd/lcm, randint_like, rsub, poisson, frombuffer, Tensor.new), nn.Buffer, Module.get_extra_state /
set_extra_state in state dicts, and torch.func's jvp / linearize / jacfwd / hessian, checked against PyTorch 1.13
where it has them and against their definitions where it does not."""
import math

import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
from trainrun import nn  # noqa: E402


def _close(ours, theirs, atol=1e-6):
    assert np.allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=atol), (ours, theirs)


def test_constants():
    assert torch.inf == math.inf and math.isnan(torch.nan) and torch.pi == math.pi and torch.e == math.e
    assert torch.full([2], -torch.inf).tolist() == [-math.inf] * 2


@needs_torch
@pytest.mark.parametrize("name", ["relu_", "sigmoid_", "exp_", "abs_", "sqrt_", "neg_", "clamp_", "zero_",
                                  "selu_", "celu_", "fill_"])
def test_top_level_in_place_functions_change_their_input(name):
    args = {"clamp_": (-0.5, 0.5), "fill_": (3.0,)}.get(name, ())
    data = np.array([[-1.5, 0.25], [2.0, 0.5]], dtype=np.float32)
    ours, theirs = torch.tensor(data), peer.tensor(data)
    if name == "sqrt_":
        ours, theirs = ours.abs(), theirs.abs()
    returned = getattr(torch, name)(ours, *args)
    getattr(peer, name)(theirs, *args)
    assert returned is ours
    _close(ours, theirs)


@needs_torch
def test_scatter_functions_match_and_differentiate_both_inputs():
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cases = [("select_scatter", (2, 4), (1, 2)), ("slice_scatter", (2, 3, 2), {"dim": 2, "start": 1, "step": 2}),
             ("diagonal_scatter", (2, 3), {"offset": 1, "dim1": 1, "dim2": 2})]
    for name, src_shape, args in cases:
        src = np.random.default_rng(0).standard_normal(src_shape).astype(np.float32)
        x, s = torch.tensor(base, requires_grad=True), torch.tensor(src, requires_grad=True)
        px, ps = peer.tensor(base, requires_grad=True), peer.tensor(src, requires_grad=True)
        kwargs = args if isinstance(args, dict) else {}
        positional = args if isinstance(args, tuple) else ()
        out = getattr(torch, name)(x, s, *positional, **kwargs)
        pout = getattr(peer, name)(px, ps, *positional, **kwargs)
        _close(out, pout)
        weights = np.random.default_rng(1).standard_normal(base.shape).astype(np.float32)
        (out * torch.tensor(weights)).sum().backward()
        (pout * peer.tensor(weights)).sum().backward()
        _close(x.grad, px.grad)
        _close(s.grad, ps.grad)
        _close(getattr(x.detach(), name)(s.detach(), *positional, **kwargs), pout)  # (the method form)
    with pytest.raises(RuntimeError, match="expected src to have a size equal to the slice"):
        torch.select_scatter(torch.zeros(2, 3), torch.zeros(2), 0, 0)


@needs_torch
def test_gradient_and_cumulative_trapezoid_match():
    y = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float64)
    for kwargs in ({}, {"spacing": 0.5}, {"dim": 1, "edge_order": 2}, {"spacing": [2.0], "dim": 0}):
        ours, theirs = torch.gradient(torch.tensor(y), **kwargs), peer.gradient(peer.tensor(y), **kwargs)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _close(a, b, atol=1e-12)
    coords = np.array([0.0, 0.5, 1.5, 1.75, 3.0, 4.0])
    (ours,), (theirs,) = (torch.gradient(torch.tensor(y), spacing=(torch.tensor(coords),), dim=1),
                          peer.gradient(peer.tensor(y), spacing=(peer.tensor(coords),), dim=1))
    _close(ours, theirs, atol=1e-12)
    _close(torch.cumulative_trapezoid(torch.tensor(y)), peer.cumulative_trapezoid(peer.tensor(y)), atol=1e-12)
    _close(torch.cumulative_trapezoid(torch.tensor(y), dx=0.1, dim=0),
           peer.cumulative_trapezoid(peer.tensor(y), dx=0.1, dim=0), atol=1e-12)
    _close(torch.cumulative_trapezoid(torch.tensor(y), torch.tensor(coords)),
           peer.cumulative_trapezoid(peer.tensor(y), peer.tensor(coords)), atol=1e-12)


@needs_torch
def test_integer_and_small_functions_match():
    a, b = np.array([12, 0, -7, 9, 0]), np.array([18, 5, 21, 0, 0])
    assert torch.gcd(torch.tensor(a), torch.tensor(b)).tolist() == peer.gcd(peer.tensor(a), peer.tensor(b)).tolist()
    assert torch.lcm(torch.tensor(a), torch.tensor(b)).tolist() == peer.lcm(peer.tensor(a), peer.tensor(b)).tolist()
    x = np.array([1.0, -2.0, 3.5], dtype=np.float32)
    _close(torch.rsub(torch.tensor(x), 2.0, alpha=3), peer.rsub(peer.tensor(x), 2.0, alpha=3))
    _close(torch.rsub(torch.tensor(x), torch.ones(3)), peer.rsub(peer.tensor(x), peer.ones(3)))
    assert torch.scalar_tensor(3).dtype == torch.float32 and torch.scalar_tensor(3).shape == ()
    m = np.random.default_rng(3).standard_normal((3, 3)).astype(np.float32)
    _close(torch.adjoint(torch.tensor(m)), peer.adjoint(peer.tensor(m)))
    _close(torch.frobenius_norm(torch.tensor(m)), peer.linalg.matrix_norm(peer.tensor(m)), atol=1e-5)
    _close(torch.nuclear_norm(torch.tensor(m)), peer.nuclear_norm(peer.tensor(m)), atol=1e-4)
    with pytest.warns(UserWarning, match="chain_matmul is deprecated"):
        _close(torch.chain_matmul(torch.tensor(m), torch.tensor(m), torch.tensor(m)),
               peer.tensor(m) @ peer.tensor(m) @ peer.tensor(m), atol=1e-5)
    assert torch.nextafter(torch.tensor([1.0]), torch.tensor([2.0])).item() == \
        peer.nextafter(peer.tensor([1.0]), peer.tensor([2.0])).item()


def test_random_counts_and_like_factories():
    torch.manual_seed(0)
    ints = torch.randint_like(torch.zeros(1000), 3, 7)
    assert ints.dtype == torch.float32 and set(ints.tolist()) == {3.0, 4.0, 5.0, 6.0}
    counts = torch.poisson(torch.full([20000], 4.0))
    assert abs(counts.mean().item() - 4.0) < 0.1 and abs(counts.var().item() - 4.0) < 0.2
    assert float(counts.round().sub(counts).abs().max()) == 0.0
    draws = torch.binomial(torch.full([20000], 10.0), torch.full([20000], 0.3))
    assert abs(draws.mean().item() - 3.0) < 0.1 and draws.max().item() <= 10
    torch.manual_seed(5)
    first = torch.poisson(torch.full([5], 3.0))
    torch.manual_seed(5)
    assert torch.equal(first, torch.poisson(torch.full([5], 3.0)))
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.poisson(torch.tensor([-1.0]))


def test_frombuffer_shares_memory_and_tensor_new():
    buffer = bytearray(np.arange(4, dtype=np.float32).tobytes())
    t = torch.frombuffer(buffer, dtype=torch.float32)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    t[0] = 9.0
    assert np.frombuffer(buffer, dtype=np.float32)[0] == 9.0
    assert torch.frombuffer(buffer, dtype=torch.float32, count=2, offset=4).tolist() == [1.0, 2.0]
    x = torch.zeros(2, dtype=torch.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype == torch.float64
    assert x.new([1, 2]).tolist() == [1.0, 2.0] and x.new().shape == (0,)
    assert x.is_set_to(x) and not x.is_set_to(x.clone())


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.mask = nn.Buffer(torch.ones(3))
        self.scratch = nn.Buffer(torch.zeros(1), persistent=False)
        self.seen = 0

    def get_extra_state(self):
        return {"seen": self.seen}

    def set_extra_state(self, state):
        self.seen = state["seen"]


def test_buffer_and_extra_state():
    model = nn.Sequential(Counter())
    model[0].seen = 11
    state = model.state_dict()
    assert list(state) == ["0.mask", "0._extra_state", "0.lin.weight", "0.lin.bias"]
    assert sorted(name for name, _ in model.named_buffers()) == ["0.mask", "0.scratch"]
    assert state["0._extra_state"] == {"seen": 11}
    fresh = nn.Sequential(Counter())
    assert not fresh.load_state_dict(state).missing_keys and fresh[0].seen == 11
    del state["0._extra_state"]
    assert fresh.load_state_dict(state, strict=False).missing_keys == ["0._extra_state"]
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "0._extra_state"'):
        fresh.load_state_dict(state)
    with pytest.raises(RuntimeError, match="should never be called"):
        nn.Linear(1, 1).get_extra_state()
    assert "_extra_state" not in "".join(nn.Linear(1, 1).state_dict())


def test_func_forward_transforms():
    from trainrun.func import hessian, jacfwd, jacrev, jvp, linearize
    x, t = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    output, product = jvp(lambda v: v.sin() * v, (x,), (t,))
    _close(output, x.sin() * x)
    _close(product, (x.cos() * x + x.sin()) * t, atol=1e-12)
    _, product, aux = jvp(lambda v: (v.exp(), {"n": 1}), (x,), (t,), has_aux=True)
    assert aux == {"n": 1}
    _close(product, x.exp() * t, atol=1e-12)
    w = torch.randn(3, 4, dtype=torch.float64)
    _close(jacfwd(lambda v: w @ v.tanh())(x), jacrev(lambda v: w @ v.tanh())(x), atol=1e-12)
    _close(jacfwd(lambda v: w @ v.tanh())(x), w * (1 - x.tanh() ** 2), atol=1e-12)
    _close(hessian(lambda v: (v ** 3).sum())(x), torch.diag(6 * x), atol=1e-12)
    _close(hessian(lambda a, v: (a * v ** 2).sum(), argnums=1)(2.0, x), torch.eye(4, dtype=torch.float64) * 4)
    out, jvp_fn = linearize(torch.sin, x)
    _close(jvp_fn(t), x.cos() * t, atol=1e-12)
    with pytest.raises(RuntimeError, match="same shape"):
        jvp(torch.sin, (x,), (torch.ones(3),))


def test_typed_storage_views_the_whole_storage():
    x = torch.arange(6.0).reshape(2, 3)
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        storage = x[1].storage()
    assert len(storage) == 6 and storage.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert storage.data_ptr() == x.data_ptr() and storage.dtype == torch.float32 and storage[4] == 4.0
    storage[0] = 10.0
    assert x[0, 0].item() == 10.0 and torch.is_storage(storage) and not torch.is_storage(x)


@needs_torch
def test_rnn_utils_unpack_and_invert():
    from trainrun.nn.utils.rnn import invert_permutation, pack_sequence, unpack_sequence
    sequences = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0, 5.0]), torch.tensor([6.0])]
    assert [s.tolist() for s in unpack_sequence(pack_sequence(sequences))] == [s.tolist() for s in sequences]
    perm = [3, 0, 2, 1]
    assert invert_permutation(torch.tensor(perm)).tolist() == \
        peer.nn.utils.rnn.invert_permutation(peer.tensor(perm)).tolist()
    assert invert_permutation(None) is None


@needs_torch
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_matches(reduce, include_self):
    import warnings
    rng = np.random.default_rng(0)
    base, source = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    index = [0, 2, 0, 3, 2]
    ours = torch.tensor(base).index_reduce(0, torch.tensor(index), torch.tensor(source), reduce,
                                           include_self=include_self)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (1.13: "index_reduce() is in beta")
        theirs = peer.tensor(base).index_reduce(0, peer.tensor(index), peer.tensor(source), reduce,
                                                include_self=include_self)
    _close(ours, theirs, atol=1e-6)
    in_place = torch.tensor(base.T.copy())
    returned = in_place.index_reduce_(1, torch.tensor(index), torch.tensor(source.T.copy()), reduce,
                                      include_self=include_self)
    assert returned is in_place
    _close(in_place, theirs.T, atol=1e-6)


def test_in_place_methods_return_the_tensor_itself():
    x = torch.ones(3)
    for name, args in (("add_", (1,)), ("mul_", (2.0,)), ("copy_", (torch.zeros(3),)), ("fill_", (2.0,)),
                       ("masked_fill_", (torch.tensor([True, False, True]), 0.0)), ("clamp_", (0.0, 1.0)),
                       ("zero_", ()), ("i0_", ()), ("requires_grad_", ())):
        assert getattr(x, name)(*args) is x, name
    weight = torch.nn.Linear(2, 2).weight
    with torch.no_grad():
        assert weight.mul_(2) is weight and isinstance(weight.add_(1), torch.nn.Parameter)
