"""nn.utils.parametrize and the weight normalizations, against PyTorch 1.13 (values, gradients, state_dict keys):
register_parametrization on C++ layers (Linear, Conv2d: their functional form runs over the computed weight)
and Python ones (Conv1d), chained parametrizations and right_inverse, cached(), remove_parametrizations;
parametrizations.weight_norm (2.1+: checked against its definition) and spectral_norm; the legacy
nn.utils.weight_norm/spectral_norm with weight_g/weight_v and weight_orig/weight_u/weight_v."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun.nn.utils import parametrize  # noqa: E402

W = [[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]]
B = [0.1, -0.2]
X = [[1.0, 2.0, -1.0], [0.5, -0.5, 0.25]]


def _linear(t):
    m = t.nn.Linear(3, 2)
    with t.no_grad():
        m.weight.copy_(t.tensor(W))
        m.bias.copy_(t.tensor(B))
    return m


def _np(v):
    return np.array(v.detach().tolist())


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(-1, -2)


class Doubled(nn.Module):
    def forward(self, x):
        return x * 2

    def right_inverse(self, x):
        return x / 2


def test_custom_parametrizations_on_cpp_and_python_layers():
    square = nn.Linear(3, 3)
    with torch.no_grad():
        square.weight.copy_(torch.arange(9.0).reshape(3, 3))
    parametrize.register_parametrization(square, "weight", Symmetric())
    assert torch.equal(square.weight, square.weight.T) and type(square).__name__ == "ParametrizedLinear"
    assert list(square.state_dict()) == ["bias", "parametrizations.weight.original"]
    x = torch.randn(2, 3)
    assert torch.allclose(square(x), x @ square.weight.T + square.bias)  # the C++ layer uses the computed weight
    square(x).sum().backward()
    assert square.parametrizations.weight.original.grad is not None
    with parametrize.cached():
        assert square.weight is square.weight
    with pytest.raises(RuntimeError, match="Symmetric does not implement right_inverse"):
        square.weight = torch.eye(3)

    chained = nn.Linear(3, 3)
    parametrize.register_parametrization(chained, "weight", Doubled())
    parametrize.register_parametrization(chained, "weight", Doubled())
    chained.weight = torch.eye(3) * 4  # stored through both right_inverses
    assert torch.allclose(chained.parametrizations.weight.original, torch.eye(3))
    assert torch.allclose(chained.weight, torch.eye(3) * 4)
    parametrize.remove_parametrizations(chained, "weight")
    assert type(chained) is nn.Linear and torch.allclose(chained.weight, torch.eye(3) * 4)
    assert [n for n, _ in chained.named_parameters()] == ["bias", "weight"]

    conv1d = nn.Conv1d(2, 2, 1)  # a Python layer: its forward reads self.weight
    parametrize.register_parametrization(conv1d, "weight", Doubled())
    assert torch.allclose(conv1d(torch.ones(1, 2, 3)), nn.functional.conv1d(torch.ones(1, 2, 3), conv1d.weight,
                                                                             conv1d.bias))
    with pytest.raises(ValueError, match="may not change the shape"):
        parametrize.register_parametrization(nn.Linear(2, 2), "weight", lambda w: w[0])
    with pytest.raises(ValueError, match="does not have a parameter"):
        parametrize.register_parametrization(nn.Linear(2, 2), "nope", Doubled())


@needs_torch
def test_custom_parametrization_trains_as_pytorchs():
    def run(t):
        class Sym(t.nn.Module):
            def forward(self, x):
                return x.triu() + x.triu(1).transpose(-1, -2)
        m = t.nn.Linear(3, 3)
        with t.no_grad():
            m.weight.copy_(t.arange(9.0).reshape(3, 3) / 9)
            m.bias.zero_()
        t.nn.utils.parametrize.register_parametrization(m, "weight", Sym())
        opt = t.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            m(t.tensor(X + [[0.0, 1.0, 0.0]])).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
        return _np(m.weight), _np(m.parametrizations.weight.original)
    for ours, theirs in zip(run(torch), run(peer)):
        assert np.allclose(ours, theirs, atol=1e-5)


def test_weight_norm_parametrization_is_its_definition():
    m = nn.utils.parametrizations.weight_norm(_linear(torch))
    g, v = m.parametrizations.weight.original0, m.parametrizations.weight.original1
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    assert np.allclose(_np(g), np.linalg.norm(np.array(W), axis=1, keepdims=True), atol=1e-6)
    assert torch.allclose(m.weight, torch.tensor(W), atol=1e-6)
    with torch.no_grad():
        g.mul_(2)
    assert torch.allclose(m.weight, torch.tensor(W) * 2, atol=1e-5)
    conv = nn.utils.parametrizations.weight_norm(nn.Conv2d(1, 2, 2))  # a C++ layer, g per output channel
    assert tuple(conv.parametrizations.weight.original0.shape) == (2, 1, 1, 1)
    assert conv(torch.ones(1, 1, 3, 3)).shape == (1, 2, 2, 2)


@needs_torch
def test_legacy_weight_norm_matches_pytorch():
    results = []
    for t in (torch, peer):
        m = t.nn.utils.weight_norm(_linear(t))
        out = m(t.tensor(X))
        out.sum().backward()
        results.append(([n for n, _ in m.named_parameters()], _np(out), _np(m.weight_g.grad), _np(m.weight_v.grad)))
        t.nn.utils.remove_weight_norm(m)
        results[-1] += ([n for n, _ in m.named_parameters()], _np(m.weight))
    ours, theirs = results
    assert ours[0] == theirs[0] == ["bias", "weight_g", "weight_v"] and ours[4] == theirs[4]
    for a, b in zip(ours[1:4] + ours[5:], theirs[1:4] + theirs[5:]):
        assert np.allclose(a, b, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("legacy", [False, True])
def test_spectral_norm_bounds_the_largest_singular_value_as_pytorchs(legacy):
    keys = []
    for t in (torch, peer):
        m = t.nn.utils.spectral_norm(_linear(t)) if legacy else \
            t.nn.utils.parametrizations.spectral_norm(_linear(t))
        for _ in range(30):
            m(t.tensor(X))
        assert abs(np.linalg.norm(_np(m.weight), 2) - 1.0) < 1e-3
        keys.append(list(m.state_dict()))
        m.eval()
        before = _np(m.weight)
        m(t.tensor(X))
        assert np.allclose(before, _np(m.weight))  # no power iteration in eval
    assert keys[0] == keys[1]
    if legacy:
        nn.utils.remove_spectral_norm(m := nn.utils.spectral_norm(nn.Linear(3, 2)))
        assert [n for n, _ in m.named_parameters()] == ["bias", "weight"] and type(m) is nn.Linear


@needs_torch
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_starts_at_the_orthogonalized_weight_and_trains_as_pytorchs(orthogonal_map):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4, 4)).astype(np.float32)
    inputs = rng.standard_normal((3, 4)).astype(np.float32)
    weights = []
    for t in (torch, peer):
        layer = t.nn.Linear(4, 4, bias=False)
        with t.no_grad():
            layer.weight.copy_(t.tensor(w0))
        t.nn.utils.parametrizations.orthogonal(layer, orthogonal_map=orthogonal_map)
        seen = [_np(layer.weight)]
        opt = t.optim.SGD(layer.parameters(), lr=0.1)
        for _ in range(3):
            (layer(t.tensor(inputs)) ** 3).sum().backward()
            opt.step()
            opt.zero_grad()
        seen.append(_np(layer.weight))
        weights.append(seen)
    ours, theirs = weights
    assert np.allclose(ours[0], theirs[0], atol=1e-5)  # (the weight's QR, R's diagonal made positive)
    assert np.allclose(ours[1], theirs[1], atol=1e-4)
    assert np.allclose(ours[1] @ ours[1].T, np.eye(4), atol=1e-5)


@pytest.mark.parametrize("shape", [(6, 3), (3, 6)])
def test_orthogonal_rectangular_weights_keep_orthonormal_columns_or_rows(shape):
    layer = nn.utils.parametrizations.orthogonal(nn.Linear(shape[1], shape[0]))
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(3):
        layer(torch.randn(2, shape[1])).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()
    w = layer.weight
    gram = w @ w.t() if shape[0] < shape[1] else w.t() @ w
    assert torch.allclose(gram, torch.eye(3), atol=1e-5)
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        nn.utils.parametrizations.orthogonal(nn.Linear(2, 2), orthogonal_map="qr")
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
        nn.utils.parametrizations.orthogonal(nn.Linear(2, 2), "bias")


def test_casting_a_tensor_that_requires_grad_to_an_integer_dtype_gives_no_history():
    x = torch.randn(3, 3, requires_grad=True)
    assert not x.int().requires_grad and x.int().grad_fn is None and not x.bool().requires_grad
    assert x.double().requires_grad
    assert x.diagonal().long().unsqueeze(-2).shape == (1, 3)
