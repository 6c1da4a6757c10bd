"""Layers and losses PyTorch scripts use that trainrun lacked: TripletMarginLoss, MultiLabelSoftMarginLoss,
MultiMarginLoss, LocalResponseNorm, Bilinear, ChannelShuffle, pdist, UpsamplingNearest2d/UpsamplingBilinear2d
(values and gradients against PyTorch 1.13); gumbel_softmax, AlphaDropout, FeatureAlphaDropout, Dropout3d and
RReLU in training (their defining properties: random draws differ from PyTorch's); LazyLinear."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402


def _ours(t, grad=False):
    out = torch.tensor(t.detach().tolist(), dtype=torch.float32 if t.is_floating_point() else torch.int64)
    return out.requires_grad_(grad)


def _close(ours, theirs, tol=1e-5):
    a, b = np.array(ours.tolist(), dtype=float), np.array(theirs.detach().tolist(), dtype=float)
    return a.shape == b.shape and np.allclose(a, b, atol=tol, rtol=1e-4)


def _both(fn_ours, fn_theirs, *inputs, tol=1e-5, grads=True):
    """Values and input gradients of the two sides on the same inputs (float inputs get gradients)."""
    theirs_in = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    ours_in = [_ours(t, t.is_floating_point()) for t in inputs]
    got, want = fn_ours(*ours_in), fn_theirs(*theirs_in)
    assert _close(got, want, tol), (got, want)
    if not grads:
        return
    got.sum().backward()
    want.sum().backward()
    for a, b in zip(ours_in, theirs_in):
        if b.grad is not None:
            assert _close(a.grad, b.grad, tol), (a.grad, b.grad)


@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_match_pytorch(reduction):
    peer.manual_seed(0)
    a, p, n = peer.randn(5, 4), peer.randn(5, 4), peer.randn(5, 4)
    for swap in (False, True):
        _both(lambda *t: nn.TripletMarginLoss(margin=0.5, swap=swap, reduction=reduction)(*t),
              lambda *t: peer.nn.TripletMarginLoss(margin=0.5, swap=swap, reduction=reduction)(*t), a, p, n)
    _both(lambda x, y: F.triplet_margin_loss(x, y, _ours(n), p=1, reduction=reduction),
          lambda x, y: peer.nn.functional.triplet_margin_loss(x, y, n, p=1, reduction=reduction), a, p)
    logits, multi_hot = peer.randn(5, 4), (peer.rand(5, 4) > 0.5).float()
    weight = peer.rand(4)
    _both(lambda x: nn.MultiLabelSoftMarginLoss(weight=_ours(weight), reduction=reduction)(x, _ours(multi_hot)),
          lambda x: peer.nn.MultiLabelSoftMarginLoss(weight=weight, reduction=reduction)(x, multi_hot), logits)
    target = peer.tensor([0, 3, 1, 1, 2])
    for power in (1, 2):
        for w in (None, weight):
            _both(lambda x: nn.MultiMarginLoss(p=power, margin=0.7, weight=None if w is None else _ours(w),
                                               reduction=reduction)(x, _ours(target)),
                  lambda x: peer.nn.MultiMarginLoss(p=power, margin=0.7, weight=w, reduction=reduction)(x, target),
                  logits)
    _both(lambda x: F.multi_margin_loss(x, torch.tensor(2), reduction=reduction),
          lambda x: peer.nn.functional.multi_margin_loss(x, peer.tensor(2), reduction=reduction), logits[0])


@needs_torch
def test_layers_match_pytorch():
    peer.manual_seed(0)
    x = peer.randn(2, 6, 3, 3)
    _both(lambda t: nn.LocalResponseNorm(3, alpha=0.1, beta=0.6, k=2.0)(t),
          lambda t: peer.nn.LocalResponseNorm(3, alpha=0.1, beta=0.6, k=2.0)(t), x)
    _both(lambda t: F.local_response_norm(t, 2), lambda t: peer.nn.functional.local_response_norm(t, 2),
          peer.randn(2, 5, 7))
    _both(lambda t: nn.ChannelShuffle(3)(t), lambda t: peer.nn.ChannelShuffle(3)(t), x, grads=False)  # (1.13: none)
    _both(lambda t: F.pdist(t), lambda t: peer.nn.functional.pdist(t), peer.randn(5, 3))
    _both(lambda t: F.pdist(t, p=1.0), lambda t: peer.nn.functional.pdist(t, p=1.0), peer.randn(4, 3))
    _both(lambda t: nn.UpsamplingBilinear2d(scale_factor=2)(t), lambda t: peer.nn.UpsamplingBilinear2d(
        scale_factor=2)(t), x)
    _both(lambda t: nn.UpsamplingNearest2d(size=(5, 4))(t), lambda t: peer.nn.UpsamplingNearest2d(size=(5, 4))(t), x)
    theirs = peer.nn.Bilinear(3, 4, 5)
    ours = nn.Bilinear(3, 4, 5)
    ours.load_state_dict({k: _ours(v) for k, v in theirs.state_dict().items()})
    _both(lambda a, b: ours(a, b), lambda a, b: theirs(a, b), peer.randn(2, 7, 3), peer.randn(2, 7, 4))
    assert tuple(ours.weight.shape) == (5, 3, 4) and nn.Bilinear(3, 4, 5, bias=False).bias is None


def test_gumbel_softmax_samples_and_passes_the_soft_gradient():
    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 3.0, 0.0, 0.0]] * 2000)
    soft = F.gumbel_softmax(logits, tau=0.5)
    assert torch.allclose(soft.sum(-1), torch.ones(2000), atol=1e-5)
    hard = F.gumbel_softmax(logits, hard=True)
    assert torch.equal(hard.sum(-1), torch.ones(2000)) and set(hard.unique().tolist()) == {0.0, 1.0}
    picked = hard.argmax(-1)
    share = float((picked == 1).float().mean())  # P(class 1) = softmax(logits)[1] = e^3 / (e^3 + 3)
    assert abs(share - np.exp(3) / (np.exp(3) + 3)) < 0.03, share
    x = logits[:3].clone().requires_grad_()
    torch.manual_seed(1)
    (F.gumbel_softmax(x, hard=True) * torch.arange(4.0)).sum().backward()
    torch.manual_seed(1)
    y = logits[:3].clone().requires_grad_()
    (F.gumbel_softmax(y, hard=False) * torch.arange(4.0)).sum().backward()
    assert torch.allclose(x.grad, y.grad)  # straight-through: the soft sample's gradient


def test_random_layers_in_training():
    torch.manual_seed(0)
    x = torch.randn(200_000)
    out = nn.AlphaDropout(0.3)(x)
    assert abs(float(out.mean())) < 0.02 and abs(float(out.var()) - 1.0) < 0.03  # self-normalising
    assert torch.equal(nn.AlphaDropout(0.3).eval()(x), x)
    maps = torch.randn(4, 16, 2, 3, 3)
    dropped = nn.Dropout3d(0.5)(maps)
    per_channel = dropped.reshape(4, 16, -1)
    zero = (per_channel == 0).all(-1)
    assert zero.any() and not zero.all()
    kept = ~zero
    assert torch.allclose(per_channel[kept], maps.reshape(4, 16, -1)[kept] * 2)
    features = nn.FeatureAlphaDropout(0.5)(maps).reshape(4, 16, -1)
    assert all(len(set(row.tolist())) == 1 for row in features[(features.std(-1) == 0)])  # whole channels set
    neg = -torch.rand(10_000) - 0.1
    rrelu = nn.RReLU(0.1, 0.3)
    slopes = rrelu(neg) / neg
    assert float(slopes.min()) >= 0.1 - 1e-6 and float(slopes.max()) <= 0.3 + 1e-6 and float(slopes.std()) > 0.03
    assert torch.allclose(rrelu.eval()(neg), neg * 0.2)
    assert torch.equal(rrelu.train()(torch.ones(3)), torch.ones(3))


def test_lazy_linear_takes_its_input_size_at_the_first_call():
    layer = nn.LazyLinear(3)
    assert layer.has_uninitialized_params() and list(layer.parameters()) == []
    x = torch.randn(4, 5)
    out = layer(x)
    assert layer.in_features == 5 and tuple(layer.weight.shape) == (3, 5) and tuple(out.shape) == (4, 3)
    assert len(list(layer.parameters())) == 2
    assert torch.allclose(out, F.linear(x, layer.weight, layer.bias))
    assert float(layer.weight.abs().max()) <= 1 / np.sqrt(5) + 1e-6  # Linear's init bound
    out.sum().backward()
    assert layer.weight.grad is not None


@needs_torch
def test_volumetric_layers_match_pytorch():
    peer.manual_seed(0)
    x = peer.randn(2, 4, 5, 6, 7)
    w, b = peer.randn(6, 2, 3, 2, 3), peer.randn(6)
    for options in ({"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 2, 1), "groups": 2},
                    {"padding": "same", "groups": 2}, {"stride": 2, "groups": 2}):
        _both(lambda t, ww, bb: F.conv3d(t, ww, bb, **options),
              lambda t, ww, bb: peer.nn.functional.conv3d(t, ww, bb, **options), x, w, b, tol=1e-4)
    _both(lambda t: F.conv3d(t, _ours(w[:, :, :1]), groups=2), lambda t: peer.nn.functional.conv3d(
        t, w[:, :, :1], groups=2), x[0], tol=1e-4)  # unbatched
    _both(lambda t: F.max_pool3d(t, (3, 2, 3), (2, 1, 2), 1), lambda t: peer.nn.functional.max_pool3d(
        t, (3, 2, 3), (2, 1, 2), 1), x)
    _both(lambda t: F.avg_pool3d(t, 3, 2, 1), lambda t: peer.nn.functional.avg_pool3d(t, 3, 2, 1), x)
    _both(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)), lambda t: peer.nn.functional.adaptive_avg_pool3d(
        t, (2, 3, 4)), x)
    _both(lambda t: F.adaptive_max_pool3d(t, (2, None, 4)), lambda t: peer.nn.functional.adaptive_max_pool3d(
        t, (2, None, 4)), x)
    x1, w1 = peer.randn(2, 4, 9), peer.randn(4, 3, 3)
    _both(lambda t, ww: F.conv_transpose1d(t, ww, stride=2, padding=1, output_padding=1),
          lambda t, ww: peer.nn.functional.conv_transpose1d(t, ww, stride=2, padding=1, output_padding=1), x1, w1,
          tol=1e-4)
    theirs = peer.nn.Conv3d(4, 6, 3, padding=1, groups=2)
    ours = nn.Conv3d(4, 6, 3, padding=1, groups=2)
    assert tuple(ours.weight.shape) == tuple(theirs.weight.shape)
    ours.load_state_dict({k: _ours(v) for k, v in theirs.state_dict().items()})
    _both(lambda t: ours(t), lambda t: theirs(t), x, tol=1e-4)
    model = nn.Sequential(nn.Conv3d(4, 2, 3), nn.MaxPool3d(2), nn.AvgPool3d(1), nn.AdaptiveAvgPool3d(1),
                          nn.AdaptiveMaxPool3d(1))
    assert tuple(model(_ours(x)).shape) == (2, 2, 1, 1, 1)
    assert tuple(nn.ConvTranspose1d(4, 3, 3, stride=2)(_ours(x1)).shape) == tuple(
        peer.nn.ConvTranspose1d(4, 3, 3, stride=2)(x1).shape)


@needs_torch
@pytest.mark.parametrize("size", [1, (1, 1), (None, 1), (1, None)])
def test_global_adaptive_pools_match_pytorch(size):
    """An average pool to one value per plane (a CNN's head) is a mean over the plane: values and gradients as
    PyTorch's, for even and odd planes, batched and not; the max pool's gradient goes to one index on ties (a
    ReLU's zeros), as PyTorch's."""
    for shape in ((2, 3, 7, 7), (3, 5, 4), (2, 4, 6, 1)):
        x = peer.randn(*shape)
        _both(lambda t: F.adaptive_avg_pool2d(t, size), lambda t: peer.nn.functional.adaptive_avg_pool2d(t, size), x)
        _both(lambda t: F.adaptive_max_pool2d(t, size), lambda t: peer.nn.functional.adaptive_max_pool2d(t, size), x)
        _both(lambda t: F.adaptive_max_pool2d(t, size), lambda t: peer.nn.functional.adaptive_max_pool2d(t, size),
              peer.zeros(*shape))  # (every value tied)
    _both(lambda t: F.adaptive_avg_pool1d(t, 1), lambda t: peer.nn.functional.adaptive_avg_pool1d(t, 1),
          peer.randn(2, 3, 9))


@needs_torch
def test_module_reprs_match_pytorch():
    for name in ("ReLU", "LeakyReLU", "ELU", "Dropout", "Dropout2d", "GELU", "SiLU", "Tanh", "Softmax",
                 "LogSoftmax", "Hardtanh", "RReLU", "ReLU6", "GLU", "Mish", "MSELoss", "CrossEntropyLoss",
                 "BCEWithLogitsLoss", "NLLLoss", "HuberLoss", "KLDivLoss", "TripletMarginLoss"):
        assert repr(getattr(nn, name)()) == repr(getattr(peer.nn, name)()), name
    assert repr(nn.ReLU(inplace=True)) == repr(peer.nn.ReLU(inplace=True))
    assert repr(nn.Softmax(dim=-1)) == repr(peer.nn.Softmax(dim=-1))


@needs_torch
@pytest.mark.parametrize("options", [{"max_norm": 1.0}, {"scale_grad_by_freq": True},
                                     {"max_norm": 0.5, "norm_type": 1.0, "padding_idx": 0}])
def test_embedding_options_match_pytorch(options):
    peer.manual_seed(0)
    theirs = peer.nn.Embedding(6, 3, **options)
    ours = nn.Embedding(6, 3, **options)
    ours.load_state_dict({k: _ours(v) for k, v in theirs.state_dict().items()})
    index = [[0, 2, 2, 5], [1, 2, 0, 0]]
    got, want = ours(torch.tensor(index)), theirs(peer.tensor(index))
    assert _close(got, want)
    assert _close(ours.weight, theirs.weight)  # (max_norm renormalizes the rows looked up, in place)
    (got * torch.arange(3.0)).sum().backward()
    (want * peer.arange(3.0)).sum().backward()
    assert _close(ours.weight.grad, theirs.weight.grad)


def test_sparse_embedding_gives_dense_gradients():
    layer = nn.Embedding(4, 2, sparse=True)
    layer(torch.tensor([1, 1])).sum().backward()
    assert tuple(layer.weight.grad.shape) == (4, 2) and torch.equal(layer.weight.grad[1], torch.full([2], 2.0))


@needs_torch
@pytest.mark.parametrize("options", [{"kdim": 3, "vdim": 5}, {"add_bias_kv": True}, {"add_zero_attn": True},
                                     {"add_bias_kv": True, "add_zero_attn": True, "kdim": 3, "vdim": 5}])
@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_options_match_pytorch(options, batch_first):
    peer.manual_seed(0)
    theirs = peer.nn.MultiheadAttention(8, 2, batch_first=batch_first, **options)
    ours = nn.MultiheadAttention(8, 2, batch_first=batch_first, **options)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: _ours(v) for k, v in theirs.state_dict().items()})
    q, k, v = peer.randn(2, 4, 8), peer.randn(2, 6, options.get("kdim", 8)), peer.randn(2, 6, options.get("vdim", 8))
    if not batch_first:
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
    padding = peer.zeros(2, 6, dtype=peer.bool)
    padding[0, -2:] = True
    causal = peer.zeros(4, 6, dtype=peer.bool)
    causal[0, 1] = True

    def run(module, lib, tensors):
        return module(*tensors, key_padding_mask=lib.tensor(padding.tolist()), attn_mask=lib.tensor(causal.tolist()))
    inputs = [x.clone().requires_grad_() for x in (q, k, v)]
    mine = [_ours(x).requires_grad_() for x in (q, k, v)]
    (out_theirs, w_theirs), (out_ours, w_ours) = run(theirs, peer, inputs), run(ours, torch, mine)
    assert _close(out_ours, out_theirs, 1e-5) and _close(w_ours, w_theirs, 1e-5)
    out_theirs.pow(2).sum().backward()
    out_ours.pow(2).sum().backward()
    for a, b in zip(mine, inputs):
        assert _close(a.grad, b.grad, 1e-4)
    for name, p in ours.named_parameters():
        assert _close(p.grad, dict(theirs.named_parameters())[name].grad, 1e-4), name


@needs_torch
@pytest.mark.parametrize("options", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
                                     {"kernel_size": (3, 2), "stride": (2, 1), "dilation": (1, 2)}])
def test_max_pool_indices_and_unpool_match_pytorch(options):
    peer.manual_seed(0)
    x = peer.randn(2, 3, 7, 8)
    x[0, 0, 0, 0] = x[0, 0, 0, 1] = 5.0  # a tie: the first position wins, as in PyTorch
    theirs_in, ours_in = x.clone().requires_grad_(), _ours(x).requires_grad_()
    want, want_idx = peer.nn.functional.max_pool2d(theirs_in, return_indices=True, **options)
    got, got_idx = F.max_pool2d(ours_in, return_indices=True, **options)
    assert _close(got, want) and got_idx.tolist() == want_idx.tolist()
    if "dilation" in options:
        return
    unpool_theirs = peer.nn.functional.max_unpool2d(want, want_idx, output_size=x.shape[-2:], **options)
    unpool_ours = F.max_unpool2d(got, got_idx, output_size=list(x.shape[-2:]), **options)
    assert _close(unpool_ours, unpool_theirs)
    unpool_theirs.pow(2).sum().backward()
    unpool_ours.pow(2).sum().backward()
    assert _close(ours_in.grad, theirs_in.grad)
    values, indices = nn.MaxPool2d(options["kernel_size"], options.get("stride"), options.get("padding", 0),
                                   return_indices=True)(ours_in)
    assert torch.equal(indices, got_idx)
    assert tuple(nn.MaxUnpool2d(options["kernel_size"], options.get("stride"), options.get("padding", 0))(
        values, indices, output_size=list(x.shape[-2:])).shape) == tuple(x.shape)


@needs_torch
@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (3, 2, 1), (4, 3, 2), (2, 1, 0), (3, 3, 1)])
def test_avg_pool_ceil_mode_padding_counts_and_divisor_match_pytorch(kernel, stride, padding):
    """avg_pool2d with ceil_mode, count_include_pad=False and divisor_override (values and gradients), and
    lp_pool over the same windows."""
    x = peer.arange(2 * 49.).reshape(2, 1, 7, 7) / 10 - 3
    for ceil_mode in (False, True):
        for include in (True, False):
            _both(lambda t: F.avg_pool2d(t, kernel, stride, padding, ceil_mode, include),
                  lambda t: peer.nn.functional.avg_pool2d(t, kernel, stride, padding, ceil_mode, include), x)
        _both(lambda t: F.avg_pool2d(t, kernel, stride, padding, ceil_mode, divisor_override=3),
              lambda t: peer.nn.functional.avg_pool2d(t, kernel, stride, padding, ceil_mode, divisor_override=3), x)
        _both(lambda t: nn.AvgPool2d(kernel, stride, padding, ceil_mode, divisor_override=2)(t),
              lambda t: peer.nn.AvgPool2d(kernel, stride, padding, ceil_mode, divisor_override=2)(t), x)
        _both(lambda t: F.lp_pool2d(t, 2, kernel, stride, ceil_mode),
              lambda t: peer.nn.functional.lp_pool2d(t, 2, kernel, stride, ceil_mode), x.abs() + 0.1)
        _both(lambda t: nn.LPPool1d(3, kernel, stride, ceil_mode)(t),
              lambda t: peer.nn.LPPool1d(3, kernel, stride, ceil_mode)(t), x.abs()[:, 0] + 0.1)


@needs_torch
def test_nanmedian_skips_nans_and_pdist_is_a_function():
    rows = peer.tensor([[1., float("nan"), 3., 2.], [5., 4., float("nan"), float("nan")], [7., 1., 2., 3.]])
    ours, theirs = torch.nanmedian(_ours(rows), dim=1), peer.nanmedian(rows, dim=1)
    assert ours.values.tolist() == theirs.values.tolist() and ours.indices.tolist() == theirs.indices.tolist()
    assert torch.nanmedian(_ours(rows)).item() == peer.nanmedian(rows).item()
    assert np.isnan(torch.nanmedian(torch.full([3], float("nan"))).item())
    w = torch.tensor([3., float("nan"), 1., 2.], requires_grad=True)
    torch.nanmedian(w).backward()
    assert w.grad.tolist() == [0.0, 0.0, 0.0, 1.0]
    x = peer.randn(5, 3)
    _both(lambda t: torch.pdist(t, p=3), lambda t: peer.pdist(t, p=3), x)


@needs_torch
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_and_grid_sample_match_pytorch(padding_mode, align_corners):
    """A spatial transformer: affine_grid's grid, then grid_sample (bilinear and nearest) reading inside and
    outside the image; values and the gradients of input, grid and theta."""
    peer.manual_seed(0)
    image = peer.randn(2, 3, 5, 6)
    theta = peer.tensor([[[1.2, -0.3, 0.4], [0.2, 0.9, -0.6]], [[0.7, 0.5, -1.1], [-0.4, 1.3, 0.3]]])
    _both(lambda t: F.affine_grid(t, [2, 3, 4, 7], align_corners=align_corners),
          lambda t: peer.nn.functional.affine_grid(t, [2, 3, 4, 7], align_corners=align_corners), theta)
    grid = peer.nn.functional.affine_grid(theta, [2, 3, 4, 7], align_corners=align_corners) * 1.4
    _both(lambda i, g: F.grid_sample(i, g, padding_mode=padding_mode, align_corners=align_corners),
          lambda i, g: peer.nn.functional.grid_sample(i, g, padding_mode=padding_mode, align_corners=align_corners),
          image, grid, tol=1e-4)
    _both(lambda i: F.grid_sample(i, _ours(grid), mode="nearest", padding_mode=padding_mode,
                                  align_corners=align_corners),
          lambda i: peer.nn.functional.grid_sample(i, grid, mode="nearest", padding_mode=padding_mode,
                                                   align_corners=align_corners), image)


@needs_torch
@pytest.mark.parametrize("align_corners", [False, True])
def test_bicubic_and_nearest_exact_interpolation_match_pytorch(align_corners):
    peer.manual_seed(1)
    image = peer.randn(1, 2, 5, 6)
    for size in ((7, 9), (3, 4)):
        _both(lambda t: F.interpolate(t, size=size, mode="bicubic", align_corners=align_corners),
              lambda t: peer.nn.functional.interpolate(t, size=size, mode="bicubic", align_corners=align_corners),
              image, tol=1e-4)
    _both(lambda t: F.interpolate(t, scale_factor=1.7, mode="nearest-exact"),
          lambda t: peer.nn.functional.interpolate(t, scale_factor=1.7, mode="nearest-exact"), image)


@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_and_multilabel_margin_losses_match_pytorch(reduction):
    """CTC over padded and concatenated targets, uneven input and target lengths, another blank, an impossible
    alignment (inf, or 0 with zero_infinity) and an empty target; gradients through log_softmax (PyTorch's CTC
    backward is only the true gradient once it passes through log_softmax). Then multilabel_margin_loss."""
    peer.manual_seed(0)
    logits = peer.randn(7, 3, 6)
    padded = peer.tensor([[1, 2, 2, 5], [3, 4, 0, 0], [2, 2, 2, 2]])
    lengths = ([7, 5, 3], [4, 2, 2])
    for blank, targets in ((0, padded), (0, peer.tensor([1, 2, 2, 5, 3, 4, 2, 2])), (5, padded.clamp(max=4))):
        for zero_infinity in (False, True):
            _both(lambda z: F.ctc_loss(z.log_softmax(2), _ours(targets), *lengths, blank=blank, reduction=reduction,
                                       zero_infinity=zero_infinity),
                  lambda z: peer.nn.functional.ctc_loss(z.log_softmax(2), targets, *lengths, blank=blank,
                                                        reduction=reduction, zero_infinity=zero_infinity),
                  logits, tol=1e-4, grads=zero_infinity)
    impossible = F.ctc_loss(_ours(logits).log_softmax(2), _ours(padded), [2, 5, 3], [4, 2, 0], reduction="none")
    assert impossible[0].item() == float("inf") and np.isfinite(impossible[2].item())
    _both(lambda z: nn.CTCLoss(reduction=reduction)(z.log_softmax(2), _ours(padded), *lengths),
          lambda z: peer.nn.CTCLoss(reduction=reduction)(z.log_softmax(2), padded, *lengths), logits, tol=1e-4)
    labels = peer.tensor([[0, 1, -1, 0], [2, -1, 0, 0], [3, 0, 1, 2]])
    _both(lambda x: F.multilabel_margin_loss(x, _ours(labels), reduction=reduction),
          lambda x: peer.nn.functional.multilabel_margin_loss(x, labels, reduction=reduction), peer.randn(3, 4))
    _both(lambda x: nn.MultiLabelMarginLoss(reduction=reduction)(x, _ours(labels[0])),
          lambda x: peer.nn.MultiLabelMarginLoss(reduction=reduction)(x, labels[0]), peer.randn(4))


@needs_torch
def test_cross_map_lrn2d_values_match_pytorch_and_its_gradient_is_its_own():
    """Values equal 1.13's (its legacy running-sum window, not LocalResponseNorm's); the gradient is the
    forward's own (checked by finite differences), which PyTorch's hand-written backward is not."""
    x = np.random.RandomState(0).randn(2, 7, 3, 3)
    for size in (1, 2, 4, 9):
        mine = nn.CrossMapLRN2d(size, 0.3, 0.75, 1.5)(torch.tensor(x))
        theirs = peer.nn.CrossMapLRN2d(size, 0.3, 0.75, 1.5)(peer.tensor(x))
        assert np.allclose(np.array(mine.tolist()), theirs.numpy(), atol=1e-12)
    layer = nn.CrossMapLRN2d(3, alpha=0.3, beta=0.75, k=1.5)
    assert isinstance(layer, nn.modules.normalization.CrossMapLRN2d) and "3, alpha=0.3" in repr(layer)
    xt = torch.tensor(x, requires_grad=True)
    weights = torch.tensor(np.random.RandomState(1).randn(*x.shape))
    (layer(xt) * weights).sum().backward()
    eps, probe = 1e-6, (1, 3, 2, 0)
    shifted = x.copy()
    shifted[probe] += eps
    up = (layer(torch.tensor(shifted)) * weights).sum().item()
    shifted[probe] -= 2 * eps
    down = (layer(torch.tensor(shifted)) * weights).sum().item()
    assert abs(xt.grad[probe].item() - (up - down) / (2 * eps)) < 1e-6
    with pytest.raises(ValueError, match="4-D input"):
        layer(torch.ones(2, 3))
