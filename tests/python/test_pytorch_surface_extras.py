"""Pieces of PyTorch's surface that scripts use in passing: register_buffer(persistent=False) (out of state_dict and
of what load_state_dict expects, still moved and listed as a buffer; None as a placeholder), Tensor.nbytes and
itemsize, the legacy tensor types (torch.FloatTensor(2, 3), torch.LongTensor([1, 2]), isinstance checks,
t.type(torch.DoubleTensor)), a tensor assigned to a buffer's name, and cross_entropy with class probabilities
as the target."""
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


class WithMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("mask", torch.tril(torch.ones(2, 2)), persistent=False)
        self.register_buffer("steps", torch.zeros(1))
        self.register_buffer("later", None)

    def forward(self, x):
        return self.lin(x) * self.mask[0]


def test_a_non_persistent_buffer_stays_out_of_the_state_dict():
    model = WithMask()
    assert list(model.state_dict()) == ["steps", "lin.weight", "lin.bias"]
    assert sorted(n for n, _ in model.named_buffers()) == ["mask", "steps"]
    assert model.later is None
    missing, unexpected = model.load_state_dict(WithMask().state_dict())
    assert missing == [] and unexpected == [], "load_state_dict does not expect the mask"
    outer = nn.Sequential(WithMask())
    assert list(outer.state_dict()) == ["0.steps", "0.lin.weight", "0.lin.bias"]
    with pytest.raises(TypeError, match="cannot assign 'list' object to buffer 'bad'"):
        model.register_buffer("bad", [1.0])
    with pytest.raises(KeyError, match="without '.'"):
        model.register_buffer("a.b", torch.ones(1))
    model.register_buffer("mask", model.mask, persistent=True)
    assert "mask" in model.state_dict(), "registered again as persistent"


@needs_torch
def test_state_dict_keys_match_pytorch_with_a_non_persistent_buffer():
    class Peer(peer.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = peer.nn.Linear(2, 2)
            self.register_buffer("mask", peer.tril(peer.ones(2, 2)), persistent=False)
            self.register_buffer("steps", peer.zeros(1))
            self.register_buffer("later", None)

    assert list(WithMask().state_dict()) == list(Peer().state_dict())


def test_nbytes_and_itemsize():
    x = torch.randn(4, 5)
    assert (x.itemsize, x.nbytes) == (4, 80)
    assert x[:, :2].nbytes == 32, "the elements the view holds"
    assert torch.zeros(3, dtype=torch.float16).nbytes == 6


def test_legacy_tensor_types():
    assert torch.FloatTensor(2, 3).shape == (2, 3) and torch.FloatTensor(2, 3).dtype == torch.float32
    assert torch.FloatTensor(torch.Size([4])).shape == (4,)
    assert torch.FloatTensor().shape == (0,)
    assert torch.LongTensor([1, 2]).tolist() == [1, 2] and torch.LongTensor([1, 2]).dtype == torch.int64
    assert torch.FloatTensor([[1, 2], [3, 4]]).shape == (2, 2)
    assert torch.DoubleTensor(torch.ones(2)).dtype == torch.float64
    x = torch.randn(3)
    assert isinstance(x, torch.FloatTensor) and not isinstance(x, torch.DoubleTensor)
    assert isinstance(torch.BoolTensor([True]), torch.BoolTensor)
    assert x.type(torch.DoubleTensor).dtype == torch.float64 and x.type() == "torch.FloatTensor"
    with pytest.raises(TypeError, match="invalid arguments to torch.FloatTensor"):
        torch.FloatTensor("a", 2)


def test_assigning_a_tensor_to_a_buffer_name_replaces_the_buffer():
    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.zeros(1))

        def forward(self, x):
            self.steps = self.steps + 1
            return x

    model = Counting()
    model(1), model(1)
    assert model.state_dict()["steps"].item() == 2 and dict(model.named_buffers())["steps"].item() == 2
    assert "steps" not in model.__dict__, "no attribute shadowing the buffer"
    norm = nn.BatchNorm1d(2)
    norm.running_mean = torch.ones(2)  # a C++ layer's buffer
    assert norm.state_dict()["running_mean"].tolist() == [1.0, 1.0]


@needs_torch
@pytest.mark.parametrize("options", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"weight": True},
                                     {"label_smoothing": 0.2, "weight": True, "reduction": "none"}])
def test_cross_entropy_with_class_probabilities_matches_pytorch(options):
    peer.manual_seed(0)
    logits, probs = peer.randn(3, 5, 2), peer.softmax(peer.randn(3, 5, 2), 1)
    weight = peer.rand(5)
    theirs_logits = logits.clone().requires_grad_()
    peer_options = dict(options, **({"weight": weight} if "weight" in options else {}))
    want = peer.nn.functional.cross_entropy(theirs_logits, probs, **peer_options)
    want.sum().backward()
    ours_logits = torch.tensor(logits.tolist(), requires_grad=True)
    our_options = dict(options, **({"weight": torch.tensor(weight.tolist())} if "weight" in options else {}))
    got = torch.nn.functional.cross_entropy(ours_logits, torch.tensor(probs.tolist()), **our_options)
    got.sum().backward()
    assert torch.allclose(got, torch.tensor(want.tolist()), atol=1e-5)
    assert torch.allclose(ours_logits.grad, torch.tensor(theirs_logits.grad.tolist()), atol=1e-5)


def test_cross_entropy_with_class_probabilities_checks_the_shape():
    with pytest.raises(RuntimeError, match="must have the input's shape"):
        torch.nn.functional.cross_entropy(torch.randn(3, 5), torch.rand(3, 4))


def test_a_buffer_registered_as_none_takes_the_tensor_assigned_later():
    model = WithMask()
    assert model.later is None and "later" not in model.state_dict()
    model.later = torch.ones(2)
    assert "later" in dict(model.named_buffers()) and model.state_dict()["later"].tolist() == [1.0, 1.0]
    assert "later" not in model.__dict__


def test_a_cpp_layer_takes_its_argument_as_input_keyword():
    layer, x = nn.Linear(2, 3), torch.randn(4, 2)
    assert torch.equal(layer(input=x), layer(x))


@needs_torch
@pytest.mark.parametrize("name", ["asin", "acos", "atan", "arcsin", "arccos", "arctan"])
def test_inverse_trigonometric_functions_match_pytorch_with_gradients(name):
    """asin/acos/atan (and the arc* aliases): values and gradients as PyTorch's over and beyond [-1, 1] (nan
    there for asin/acos), as functions, methods and in-place methods; integer inputs give floats."""
    import numpy as np
    grid = np.concatenate([np.linspace(-1.3, 1.3, 27), [0.0, 1e-8, -0.999, 0.999]]).astype(np.float32)
    grid = grid[np.abs(np.abs(grid) - 1) > 1e-6]  # (at exactly +-1 the gradient is infinite)
    ours_in, theirs_in = torch.tensor(grid, requires_grad=True), peer.tensor(grid, requires_grad=True)
    ours, theirs = getattr(torch, name)(ours_in), getattr(peer, name)(theirs_in)
    ours.sum().backward()
    theirs.sum().backward()
    assert np.allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    assert np.allclose(ours_in.grad.numpy(), theirs_in.grad.numpy(), rtol=1e-4, atol=1e-5, equal_nan=True)
    x = torch.tensor([0.25, -0.5])
    assert torch.allclose(getattr(x, name)(), getattr(torch, name)(x))
    y = x.clone()
    getattr(y, name + "_")()
    assert torch.allclose(y, getattr(torch, name)(x))
    assert getattr(torch, name)(torch.tensor([0, 1])).dtype == torch.float32
    if name in ("atan", "arctan"):  # large magnitudes do not overflow on the way
        big = [-1e30, -1e6, 7.0, 1e30]
        assert np.allclose(getattr(torch, name)(torch.tensor(big)).numpy(), np.arctan(np.float32(big)), rtol=1e-6)


def test_out_arguments_take_the_result_as_pytorchs_do():
    """out= on functions whose bindings lacked it: the same tensor back, holding the result; resized (with a
    warning) when its shape differs; (values, indices) results into a tuple of outs; refused when a float result
    would go into an integer tensor or an argument requires grad."""
    a, b = torch.arange(6.).reshape(2, 3), torch.arange(6.).reshape(3, 2)
    out = torch.empty(2, 2)
    assert torch.matmul(a, b, out=out) is out and torch.equal(out, a @ b)
    empty = torch.empty(0)
    assert torch.sum(a, 0, out=empty).tolist() == [3.0, 5.0, 7.0] and empty.shape == (3,)
    small = torch.empty(5)
    with pytest.warns(UserWarning, match="was resized since it had shape \\[5\\]"):
        torch.cat([a.flatten(), a.flatten()], out=small)
    assert small.shape == (12,) and small[6:].tolist() == a.flatten().tolist()
    values, indices = torch.empty(2), torch.empty(2, dtype=torch.long)
    result = torch.max(a, 1, out=(values, indices))
    assert result.values is values and result.indices is indices and indices.tolist() == [2, 2]
    sorted_values, order = torch.sort(torch.tensor([3., 1., 2.]), out=(torch.empty(3), torch.empty(3).long()))
    assert sorted_values.tolist() == [1.0, 2.0, 3.0] and order.tolist() == [1, 2, 0]
    stacked = torch.empty(2, 3, 2)
    torch.stack([a, a], dim=2, out=stacked)
    assert torch.equal(stacked[..., 1], a)
    wide = torch.empty(2, 3, dtype=torch.float64)  # a float32 result goes into a float64 out
    assert torch.clamp(a, 1, 4, out=wide).dtype == torch.float64 and wide.max().item() == 4.0
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type int64"):
        torch.cumsum(a, 0, out=torch.empty(2, 3, dtype=torch.long))
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        torch.bmm(a[None].requires_grad_(), b[None], out=torch.empty(1, 2, 2))
    with torch.no_grad():
        assert not torch.mm(a.requires_grad_(), b, out=torch.empty(2, 2)).requires_grad
    assert torch.asin(torch.zeros(2), out=torch.ones(2)).tolist() == [0.0, 0.0]


def test_set_makes_a_tensor_another_handle_on_a_storage():
    source = torch.arange(6.).reshape(2, 3)
    target = torch.empty(0)
    assert target.set_(source) is target and target.shape == (2, 3) and target.stride() == (3, 1)
    target[0, 0] = 7.0
    assert source[0, 0].item() == 7.0
    with pytest.raises(TypeError, match="the source is int64, this tensor float32"):
        torch.empty(1).set_(torch.arange(3))


def test_typename_names_tensor_types_and_objects():
    assert torch.typename(torch.ones(1)) == "torch.FloatTensor"
    assert torch.typename(torch.ones(1).long()) == "torch.LongTensor"
    assert torch.typename(3) == "int" and torch.typename(nn.Module).endswith(".Module")


def test_more_in_place_methods_attributes_and_top_level_nn_functions():
    """In-place forms PyTorch has for methods trainrun had only out of place; the attributes a dense real tensor
    answers (layout, is_cpu, real, is_sparse...); asarray; the nn functions bound at torch's top level."""
    a = torch.arange(6.).reshape(2, 3)
    assert a.cumsum_(1).tolist() == [[0.0, 1.0, 3.0], [3.0, 7.0, 12.0]]
    b = torch.ones(3)
    assert b.greater_(torch.tensor([0., 2., 0.])).tolist() == [1.0, 0.0, 1.0] and b.dtype == torch.float32
    m = torch.ones(2, 2)
    assert m.addmm_(torch.ones(2, 2), torch.ones(2, 2), beta=0.5).tolist() == [[2.5, 2.5], [2.5, 2.5]]
    w = torch.ones(3, requires_grad=True)
    (w * 1).cumsum_(0).sum().backward()  # (the in-place form keeps the graph right)
    assert w.grad.tolist() == [3.0, 2.0, 1.0]
    for name in ("atan2_", "xlogy_", "logical_and_", "multiply_", "true_divide_", "hypot_", "sinc_", "lgamma_"):
        assert callable(getattr(torch.Tensor, name)), name
    x = torch.tensor([1., float("inf"), -float("inf")])
    assert torch.isposinf(x).tolist() == [False, True, False] and x.isneginf().tolist() == [False, False, True]
    assert torch.isreal(x).all().item() and x.real is x and x.layout == torch.strided and x.is_cpu
    assert not x.is_sparse and not x.is_quantized and not x.is_nested
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        x.imag
    assert torch.ones(2, 3).sum_to_size(1, 3).tolist() == [[2.0, 2.0, 2.0]]
    shared = torch.arange(3.)
    assert torch.asarray(shared) is shared and torch.asarray(shared, copy=True) is not shared
    assert torch.asarray([1, 2]).dtype == torch.int64
    assert torch.asarray(shared, dtype=torch.float64).dtype == torch.float64
    assert torch.dropout(torch.ones(4), 0.5, False).tolist() == [1.0] * 4
    assert torch.layer_norm(torch.ones(2, 3), [3]).shape == (2, 3)
    assert torch.embedding(torch.eye(3), torch.tensor([2, 0])).tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    assert torch.conv1d(torch.ones(1, 1, 4), torch.ones(1, 1, 2)).tolist() == [[[2.0, 2.0, 2.0]]]
    assert torch.batch_norm(torch.ones(2, 3), None, None, torch.zeros(3), torch.ones(3), False, 0.1, 1e-5,
                            True).shape == (2, 3)
