"""Smaller pieces of PyTorch's surface: nn.NLLLoss2d/RNNCellBase/Container, F.upsample_nearest/upsample_bilinear/
native_channel_shuffle, torch.func.functionalize/replace_all_batch_norm_modules_, autograd's multithreading
switch, torch.distributions.utils, torch.utils.swap_tensors, and torch.special.gammainc/gammaincc (against
PyTorch 1.13, whose values near a = x are good to 1e-9 only; ours match a long series to 1e-14)."""
import math

import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
from trainrun import nn  # noqa: E402


@needs_torch
def test_nn_names_and_deprecated_functions():
    assert issubclass(nn.NLLLoss2d, nn.NLLLoss) and isinstance(nn.GRUCell(2, 3), nn.RNNCellBase)
    with pytest.warns(UserWarning, match="Container is deprecated"):
        container = nn.Container(lin=nn.Linear(2, 2))
    assert [n for n, _ in container.named_children()] == ["lin"]
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 3)).astype(np.float32)
    with pytest.warns(UserWarning, match="deprecated"):
        ours = nn.functional.upsample_bilinear(torch.tensor(x), scale_factor=2)
    theirs = peer.nn.functional.upsample_bilinear(peer.tensor(x), scale_factor=2)
    assert np.allclose(ours.numpy(), theirs.numpy(), atol=1e-6)
    with pytest.warns(UserWarning, match="deprecated"):
        assert nn.functional.upsample_nearest(torch.tensor(x), size=(6, 6)).shape == (1, 2, 6, 6)
    shuffled = nn.functional.native_channel_shuffle(torch.arange(8.0).reshape(1, 4, 2), 2)
    assert shuffled.tolist() == peer.native_channel_shuffle(peer.arange(8.0).reshape(1, 4, 2), 2).tolist()


def test_func_helpers_and_multithreading_switch():
    f = lambda x: x.add_(1).mul(2)  # noqa: E731
    assert torch.func.functionalize(f) is f
    with pytest.raises(RuntimeError, match="invalid argument for remove"):
        torch.func.functionalize(f, remove="views")
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    torch.func.replace_all_batch_norm_modules_(model)
    assert model[1].running_mean is None and not model[1].track_running_stats
    model.eval()
    out = model[1](torch.randn(8, 3) * 3 + 2)
    assert torch.allclose(out.mean(0), torch.zeros(3), atol=1e-5)  # (batch statistics, in eval too)
    assert torch.autograd.is_multithreading_enabled()
    with torch.autograd.set_multithreading_enabled(False):
        assert not torch.autograd.is_multithreading_enabled()
    assert torch.autograd.is_multithreading_enabled()


@needs_torch
def test_distributions_utils_match():
    from trainrun.distributions import utils
    p = torch.tensor([0.2, 0.5, 0.9])
    for binary in (True, False):
        assert np.allclose(utils.probs_to_logits(p, binary).numpy(),
                           peer.distributions.utils.probs_to_logits(peer.tensor([0.2, 0.5, 0.9]), binary).numpy())
    m = torch.arange(16.0).reshape(4, 4)
    for diag in (-1, 0, 1):
        vec = utils.tril_matrix_to_vec(m, diag)
        theirs = peer.distributions.utils.tril_matrix_to_vec(peer.arange(16.0).reshape(4, 4), diag)
        assert vec.tolist() == theirs.tolist()
        assert utils.vec_to_tril_matrix(vec, diag).tolist() == \
            peer.distributions.utils.vec_to_tril_matrix(theirs, diag).tolist()

    class Thing:
        calls = 0

        @utils.lazy_property
        def value(self):
            Thing.calls += 1
            return 3

    thing = Thing()
    assert thing.value == 3 and thing.value == 3 and Thing.calls == 1


def test_swap_tensors():
    a, b = torch.ones(2, requires_grad=True), torch.zeros(3)
    a.grad = torch.full([2], 5.0)
    holder = [a, b]
    torch.utils.swap_tensors(a, b)
    assert holder[0] is a and a.tolist() == [0.0, 0.0, 0.0] and not a.requires_grad and a.grad is None
    assert b.tolist() == [1.0, 1.0] and b.requires_grad and b.grad.tolist() == [5.0, 5.0]
    with pytest.raises(TypeError, match="one dtype"):
        torch.utils.swap_tensors(torch.ones(1), torch.ones(1, dtype=torch.float64))


@needs_torch
def test_incomplete_gamma_matches():
    a = np.array([0.1, 0.5, 1.0, 2.5, 10.0, 3.0, 3.0, 3.0, 100.0, 50.0])
    x = np.array([0.01, 0.3, 1.0, 2.0, 12.0, 0.0, 3.999, 4.001, 150.0, 45.0])
    for name in ("gammainc", "gammaincc"):
        ours = getattr(torch.special, name)(torch.tensor(a), torch.tensor(x)).numpy()
        theirs = getattr(peer.special, name)(peer.tensor(a), peer.tensor(x)).numpy()
        assert np.allclose(ours, theirs, rtol=0, atol=1e-9), np.abs(ours - theirs).max()
    term = total = 1.0  # P(50, 45) by its series in Python floats, 2000 terms
    for n in range(1, 2000):
        term *= 45.0 / (50.0 + n)
        total += term
    reference = math.exp(50 * math.log(45.0) - 45.0 - math.lgamma(51.0)) * total
    assert abs(torch.special.gammainc(torch.tensor([50.0], dtype=torch.float64),
                                      torch.tensor([45.0], dtype=torch.float64)).item() - reference) < 1e-14


@needs_torch
@pytest.mark.parametrize("separate", [False, True])
def test_multi_head_attention_forward_matches(separate):
    rng = np.random.default_rng(1)
    length, batch, embed, heads = 4, 2, 8, 2
    q, k, v = (rng.standard_normal((length, batch, embed)).astype(np.float32) for _ in range(3))
    packed = (rng.standard_normal((3 * embed, embed)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(3 * embed).astype(np.float32)
    out_w, out_b = (rng.standard_normal((embed, embed)) * 0.3).astype(np.float32), rng.standard_normal(embed).astype(
        np.float32)
    mask = np.triu(np.ones((length, length), dtype=bool), 1)
    padding = np.array([[False, False, False, True], [False, False, False, False]])

    def run(lib):
        extra = dict(use_separate_proj_weight=True, q_proj_weight=lib.tensor(packed[:embed]),
                     k_proj_weight=lib.tensor(packed[embed:2 * embed]), v_proj_weight=lib.tensor(packed[2 * embed:])) \
            if separate else {}
        return lib.nn.functional.multi_head_attention_forward(
            lib.tensor(q), lib.tensor(k), lib.tensor(v), embed, heads, None if separate else lib.tensor(packed),
            lib.tensor(bias), None, None, False, 0.0, lib.tensor(out_w), lib.tensor(out_b),
            key_padding_mask=lib.tensor(padding), attn_mask=lib.tensor(mask), **extra)
    ours, theirs = run(torch), run(peer)
    assert np.allclose(ours[0].numpy(), theirs[0].numpy(), atol=1e-5)
    assert np.allclose(ours[1].numpy(), theirs[1].numpy(), atol=1e-6)


@needs_torch
def test_adaptive_log_softmax_matches_with_gradients():
    torch.manual_seed(0)
    ours = nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 12], div_value=2.0, head_bias=True)
    theirs = peer.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 12], div_value=2.0, head_bias=True)
    theirs.load_state_dict({k: peer.tensor(v.detach().numpy()) for k, v in ours.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = np.random.default_rng(0).standard_normal((6, 16)).astype(np.float32)
    y = np.array([0, 4, 5, 11, 12, 19])
    xo, xp = torch.tensor(x, requires_grad=True), peer.tensor(x, requires_grad=True)
    a, b = ours(xo, torch.tensor(y)), theirs(xp, peer.tensor(y))
    assert np.allclose(a.output.detach().numpy(), b.output.detach().numpy(), atol=1e-5)
    a.loss.backward()
    b.loss.backward()
    assert np.allclose(xo.grad.numpy(), xp.grad.numpy(), atol=1e-6)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        assert np.allclose(p.grad.numpy(), q.grad.numpy(), atol=1e-6)
    assert np.allclose(ours.log_prob(torch.tensor(x)).detach().numpy(),
                       theirs.log_prob(peer.tensor(x)).detach().numpy(), atol=1e-5)
    assert ours.predict(torch.tensor(x)).tolist() == theirs.predict(peer.tensor(x)).tolist()
    single = ours(torch.tensor(x[0]), torch.tensor(0))
    assert single.output.shape == () and abs(single.output.item() - a.output[0].item()) < 1e-5
    with pytest.raises(RuntimeError, match="Target values should be in \\[0, 19\\]"):
        ours(torch.tensor(x[:1]), torch.tensor([20]))
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
        nn.AdaptiveLogSoftmaxWithLoss(16, 20, [12, 5])


def test_angle_complex_conversions_and_compiler_compile():
    x = torch.tensor([-1.0, 2.0])
    assert torch.allclose(x.angle(), torch.tensor([math.pi, 0.0]))
    z = x.cfloat()
    assert z.dtype == torch.complex64 and z.real.tolist() == [-1.0, 2.0] and z.imag.tolist() == [0.0, 0.0]
    assert x.cdouble().dtype == torch.complex128
    doubled = torch.compiler.compile(lambda a: a * 2)
    assert doubled(torch.ones(2)).tolist() == [2.0, 2.0]


def test_device_agnostic_and_older_top_level_functions():
    assert torch.accelerator.is_available() == torch.cuda.is_available()
    assert torch.get_device_module("cpu") is torch.cpu
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        assert torch.range(1, 4, 0.5).tolist() == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    rows, cols = torch.unravel_index(torch.tensor([4, 7, -1, 8]), (2, 4))  # (PyTorch 2.6's values)
    assert rows.tolist() == [1, 1, 1, 0] and cols.tolist() == [0, 3, 3, 0]
    assert [c.item() for c in torch.unravel_index(torch.tensor(5), (2, 4))] == [1, 1]
    a = torch.randn(20, 8, dtype=torch.float64) @ torch.randn(8, 15, dtype=torch.float64)  # (rank 8)
    u, s, v = torch.svd_lowrank(a, q=8)
    assert torch.allclose(u @ torch.diag(s) @ v.T, a, atol=1e-8)
    u, s, v = torch.pca_lowrank(a, q=8)
    centred = a - a.mean(0, keepdim=True)
    assert torch.allclose(u @ torch.diag(s) @ v.T, centred, atol=1e-8)
    assert not torch.is_autocast_cpu_enabled()
    torch.set_autocast_cpu_enabled(True)
    try:
        assert torch.is_autocast_cpu_enabled() and torch.get_autocast_cpu_dtype() == torch.bfloat16
    finally:
        torch.set_autocast_cpu_enabled(False)
    assert torch.GradScaler is torch.amp.GradScaler and torch.OutOfMemoryError is torch.cuda.OutOfMemoryError
    assert torch.newaxis is None and not torch.is_conj(torch.ones(1)) and torch.get_device(torch.ones(1)) == -1


def test_checkpoint_context_fn_and_selective_checkpointing():
    import contextlib
    import functools
    from trainrun.utils.checkpoint import (CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts,
                                           set_checkpoint_early_stop)
    torch.manual_seed(0)
    lin = nn.Linear(4, 4)
    events = []

    @contextlib.contextmanager
    def tag(name):
        events.append(name + "+")
        yield
        events.append(name + "-")
    x = torch.randn(2, 4, requires_grad=True)
    checkpoint(lambda v: lin(v).tanh(), x, use_reentrant=False, context_fn=lambda: (tag("fwd"), tag("re"))).sum() \
        .backward()
    assert events == ["fwd+", "fwd-", "re+", "re-"]  # (the forward in the first, the recomputation in the second)

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op == "mm" else CheckpointPolicy.PREFER_RECOMPUTE
    lin.zero_grad()
    y = torch.randn(3, 4, requires_grad=True)
    with set_checkpoint_early_stop(False):
        out = checkpoint(lambda v: lin(v).relu(), y, use_reentrant=False,
                         context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
    out.pow(2).sum().backward()
    expected_y, expected_w = torch.autograd.grad(lin(y).relu().pow(2).sum(), [y, lin.weight])
    assert torch.allclose(y.grad, expected_y) and torch.allclose(lin.weight.grad, expected_w)
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        checkpoint(lin, y, use_reentrant=True, context_fn=lambda: (tag("a"), tag("b")))
    with pytest.raises(TypeError, match="function or a list of ops"):
        create_selective_checkpoint_contexts(3)
