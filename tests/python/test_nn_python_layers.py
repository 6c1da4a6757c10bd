"""The Python-side layers and functions that PyTorch 1.13 (the oracle of the
conformance suite) cannot check idiom by idiom: MultiheadAttention against
torch's with the same weights and masks, scaled_dot_product_attention and
rms_norm (PyTorch 2.x APIs) against their formulas computed in torch, hooks
with keyword arguments, and the errors of the op table."""
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402


def _np(t):
    return t.detach().cpu().numpy()


def _inputs(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_pytorch_with_masks(batch_first):
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    E, H, L, S, N = 8, 2, 4, 5, 3
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=batch_first)
    ours = tr.nn.MultiheadAttention(E, H, batch_first=batch_first)
    ours.load_state_dict({k: tr.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    q, k = _inputs(0, (L, N, E), (S, N, E))
    if batch_first:
        q, k = q.transpose(1, 0, 2).copy(), k.transpose(1, 0, 2).copy()
    attn_mask = np.triu(np.ones((L, S), dtype=bool), 2)
    padding = np.zeros((N, S), dtype=bool)
    padding[1, -2:] = True
    outs = {}
    for lib, m in (("torch", theirs), ("trainrun", ours)):
        t = torch if lib == "torch" else tr
        qt = t.tensor(q, requires_grad=True)
        kt = t.tensor(k)
        out, weights = m(qt, kt, kt, key_padding_mask=t.tensor(padding), attn_mask=t.tensor(attn_mask))
        out.sum().backward()
        grad_w = m.in_proj_weight.grad
        outs[lib] = [_np(out) if lib == "trainrun" else out.detach().numpy(),
                     _np(weights) if lib == "trainrun" else weights.detach().numpy(),
                     _np(qt.grad) if lib == "trainrun" else qt.grad.numpy(),
                     _np(grad_w) if lib == "trainrun" else grad_w.numpy()]
    for a, b in zip(outs["trainrun"], outs["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["seq first", "batch first", "unbatched"])
def test_self_attention_with_a_per_head_float_mask_matches_pytorch(layout):
    """query is key is value (the encoder's call): outputs, per-head weights and every gradient."""
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    E, H, L, N = 12, 3, 5, 2
    batch_first = layout == "batch first"
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=batch_first)
    with torch.no_grad():
        theirs.in_proj_bias.normal_()
        theirs.out_proj.bias.normal_()
    ours = tr.nn.MultiheadAttention(E, H, batch_first=batch_first)
    ours.load_state_dict({k: tr.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    shape = {"seq first": (L, N, E), "batch first": (N, L, E), "unbatched": (L, E)}[layout]
    x, mask = _inputs(1, shape, (N * H if layout != "unbatched" else H, L, L))
    results = {}
    for lib, m in (("torch", theirs), ("trainrun", ours)):
        t = torch if lib == "torch" else tr
        xt = t.tensor(x, requires_grad=True)
        out, weights = m(xt, xt, xt, attn_mask=t.tensor(mask), average_attn_weights=False)
        (out * out).sum().backward()
        values = [out, weights, xt.grad, m.in_proj_weight.grad, m.in_proj_bias.grad, m.out_proj.weight.grad,
                  m.out_proj.bias.grad]
        results[lib] = [_np(v) if lib == "trainrun" else v.detach().numpy() for v in values]
    for name, a, b in zip(["out", "weights", "x.grad", "in_proj_weight.grad", "in_proj_bias.grad",
                           "out_proj.weight.grad", "out_proj.bias.grad"], results["trainrun"], results["torch"]):
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)


def test_multihead_attention_unbatched_and_per_head_weights():
    m = tr.nn.MultiheadAttention(6, 3)
    q = tr.randn(4, 6)
    out, w = m(q, q, q, average_attn_weights=False)
    assert list(out.shape) == [4, 6] and list(w.shape) == [3, 4, 4]
    np.testing.assert_allclose(_np(w.sum(dim=-1)), np.ones((3, 4)), rtol=1e-5)


def _sdpa_reference(torch, q, k, v, mask=None, causal=False, scale=None):
    s = (1.0 / np.sqrt(q.shape[-1])) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * s
    if causal:
        scores = scores.masked_fill(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1), float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("case", ["plain", "causal", "bool mask", "float mask", "scale"])
def test_scaled_dot_product_attention_matches_its_formula(case):
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    q, k, v = _inputs(1, (2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4))
    bool_mask = np.random.default_rng(2).random((5, 6)) > 0.3
    bool_mask[:, 0] = True  # every row attends somewhere
    float_mask = np.random.default_rng(3).standard_normal((5, 6)).astype(np.float32)
    kwargs = {"causal": {"is_causal": True}, "bool mask": {"attn_mask": bool_mask},
              "float mask": {"attn_mask": float_mask}, "scale": {"scale": 0.3}}.get(case, {})
    results = {}
    for lib in ("torch", "trainrun"):
        t = torch if lib == "torch" else tr
        qt = t.tensor(q, requires_grad=True)
        args = {key: (t.tensor(val) if isinstance(val, np.ndarray) else val) for key, val in kwargs.items()}
        if lib == "torch":
            out = _sdpa_reference(torch, qt, t.tensor(k), t.tensor(v), mask=args.get("attn_mask"),
                                  causal=args.get("is_causal", False), scale=args.get("scale"))
        else:
            out = F.scaled_dot_product_attention(qt, t.tensor(k), t.tensor(v), **args)
        (out * out).sum().backward()
        results[lib] = (np.asarray(out.detach().numpy()), np.asarray(qt.grad.numpy()))
    for a, b in zip(results["trainrun"], results["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_sdpa_refuses_mask_and_causal_together():
    q = tr.ones(1, 2, 2)
    with pytest.raises(ValueError, match="attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=tr.ones(2, 2, dtype=tr.bool), is_causal=True)


def test_rms_norm_matches_its_formula():
    x, w = _inputs(4, (3, 8), (8,))
    out = F.rms_norm(tr.tensor(x), (8,), tr.tensor(w), eps=1e-6)
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(_np(out), expected, rtol=1e-5, atol=1e-6)
    default_eps = F.rms_norm(tr.tensor(x), [8])
    np.testing.assert_allclose(_np(default_eps), x / np.sqrt((x * x).mean(-1, keepdims=True) +
                                                             np.finfo(np.float32).eps), rtol=1e-5)


def test_hooks_with_kwargs_order_and_removal():
    class Scale(tr.nn.Module):
        def forward(self, a, k=1.0):
            return a * k

    m = Scale()
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"k": 3.0}), with_kwargs=True)
    h2 = m.register_forward_hook(lambda mod, args, kwargs, out: calls.append(("post", kwargs["k"])) or out + 1,
                                 with_kwargs=True)
    m.register_forward_pre_hook(lambda mod, args: calls.append("first"), prepend=True)
    assert _np(m(tr.ones(2))).tolist() == [4.0, 4.0]
    assert calls == ["first", ("post", 3.0)]
    h1.remove()
    h2.remove()
    assert _np(m(tr.ones(2), k=2.0)).tolist() == [2.0, 2.0]


def test_op_table_errors_name_the_function_and_argument():
    x = tr.ones(2, 3)
    with pytest.raises(ValueError, match="subscript 'i' is repeated in operand 0 for dims of sizes 2 and 3"):
        tr.einsum("ii->i", tr.ones(2, 3))
    with pytest.raises(ValueError, match="einsum.*operands"):
        tr.einsum("ij,jk->ik", x)
    with pytest.raises(ValueError, match="reflect padding"):
        F.pad(tr.ones(1, 2, 2), (2, 2), mode="reflect")
    with pytest.raises(ValueError, match="repeat.*cannot be smaller"):
        x.repeat(2)
    with pytest.raises(IndexError, match="flip.*dim 5"):
        x.flip(5)
    with pytest.raises(TypeError, match="flip.*dims must be ints"):
        x.flip(1.5)
    with pytest.raises(NotImplementedError, match="scatter_reduce.*no gradient"):
        tr.zeros(3, requires_grad=True).scatter_reduce(0, tr.tensor([0]), tr.ones(1), "amax")
    with pytest.raises(ValueError, match="split sizes"):
        x.split([1, 1], dim=1)
    with pytest.raises(IndexError, match="kthvalue.*out of range"):
        x.kthvalue(4)


def test_nn_init_fills_in_place_without_a_graph():
    w = tr.nn.Parameter(tr.empty(16, 8))
    out = tr.nn.init.kaiming_uniform_(w, a=5 ** 0.5)
    assert out is w and w.grad_fn is None and w.requires_grad
    x = tr.ones(3)
    assert x.uniform_(0, 1) is x and x.normal_() is x and x.abs_() is x and x.clamp_(max=0.5) is x
    bound = 1 / np.sqrt(8)
    assert np.abs(_np(w)).max() <= bound + 1e-6


def test_compile_gives_the_same_results():
    m = tr.nn.Linear(4, 2)
    x = tr.ones(3, 4)
    compiled = tr.compile(m)
    assert compiled._orig_mod is m and _np(compiled(x)).tolist() == _np(m(x)).tolist()
    assert _np(compiled(x)).tolist() == _np(m(x)).tolist()  # the replay (tests/python/test_compile.py)

    @tr.compile(mode="reduce-overhead")
    def f(a):
        return a * 2
    assert _np(f(x)).tolist() == _np(x * 2).tolist()


def test_transformer_encoder_layer_matches_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    for norm_first, batch_first in ((False, True), (True, False)):
        theirs = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=batch_first,
                                                  norm_first=norm_first, activation="gelu")
        ours = tr.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=batch_first,
                                             norm_first=norm_first, activation="gelu")
        ours.load_state_dict({k: tr.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
        (x,) = _inputs(5, (2, 5, 8) if batch_first else (5, 2, 8))  # 2 sequences of 5
        mask = np.triu(np.ones((5, 5), dtype=bool), 1)
        a = theirs(torch.tensor(x), src_mask=torch.tensor(mask)).detach().numpy()
        b = _np(ours(tr.tensor(x), src_mask=tr.tensor(mask)))
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_deleting_children_keeps_the_other_names():
    """torchtitan's pipeline split: `del model.layers[key]` and `model.tok_embeddings = None` drop what another
    stage owns; the remaining parameters keep their names, and state_dict follows."""
    from trainrun import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(5, 4)
            self.layers = nn.ModuleDict({str(i): nn.Linear(4, 4) for i in range(3)})
            self.extra = nn.Linear(4, 2)

    net = Net()
    del net.layers["0"]
    net.tok_embeddings = None
    del net.extra
    assert net.tok_embeddings is None and list(net.layers.keys()) == ["1", "2"]
    assert [n for n, _ in net.named_parameters()] == ["layers.1.weight", "layers.1.bias", "layers.2.weight",
                                                      "layers.2.bias"]
    assert list(net.state_dict()) == [n for n, _ in net.named_parameters()]
    with pytest.raises(AttributeError):
        net.extra
    with pytest.raises(KeyError):
        del net.layers["0"]
