"""Automatic mixed precision: trainrun.autocast against PyTorch 1.13's CPU
autocast (result dtypes per op, values within bfloat16's precision,
float32 gradients), nesting and the decorator, and GradScaler's rules."""

import numpy as np
import pytest

from built_tree import needs_torch, torch  # trainrun from the source tree; skips when not built

import trainrun  # noqa: E402


# Expressions over x (5x4), w (3x4), img (1x3x8x8), conv weight k (2x3x3x3), target t.
EXPRESSIONS = {
    "linear": "F.linear(x, w)",
    "matmul": "x @ w.t()",
    "matmul vector": "x @ w[0]",
    "bmm": "lib.bmm(x[None], w.t()[None])",
    "conv2d": "F.conv2d(img, k)",
    "softmax": "lib.softmax(F.linear(x, w), dim=-1)",
    "log_softmax": "F.log_softmax(F.linear(x, w), dim=-1)",
    "sum": "F.linear(x, w).sum()",
    "layer_norm": "F.layer_norm(F.linear(x, w), (3,))",
    "cross_entropy": "F.cross_entropy(F.linear(x, w), t)",
    "mse_loss": "F.mse_loss(F.linear(x, w), lib.zeros(5, 3))",
    "add": "x + 1",
    "relu of linear": "F.relu(F.linear(x, w))",
}


def inputs(lib):
    rng = np.random.default_rng(0)
    arrays = {"x": rng.standard_normal((5, 4)), "w": rng.standard_normal((3, 4)),
              "img": rng.standard_normal((1, 3, 8, 8)), "k": rng.standard_normal((2, 3, 3, 3))}
    env = {name: lib.tensor(a.astype(np.float32)) for name, a in arrays.items()}
    env.update(t=lib.tensor([0, 1, 2, 0, 1]), lib=lib, F=lib.nn.functional)
    return env


@needs_torch
@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_result_dtypes_and_values_match_pytorch_cpu_autocast(name):
    results = {}
    for lib in (trainrun, torch):
        env = inputs(lib)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out = eval(EXPRESSIONS[name], env)
        results[lib.__name__] = (str(out.dtype).split(".")[-1], out.float().detach().numpy() if lib is torch
                                 else out.float().detach().numpy())
    assert results["trainrun"][0] == results["torch"][0], name
    np.testing.assert_allclose(results["trainrun"][1], results["torch"][1], rtol=3e-2, atol=3e-2)


def test_gradients_come_back_in_float32_close_to_full_precision():
    trainrun.manual_seed(0)
    model = trainrun.nn.Sequential(trainrun.nn.Linear(8, 16), trainrun.nn.ReLU(), trainrun.nn.Linear(16, 4))
    x, target = trainrun.randn(32, 8), trainrun.randint(0, 4, (32,))
    trainrun.nn.functional.cross_entropy(model(x), target).backward()
    full = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with trainrun.autocast(device_type="cpu"):
        out = model(x)
        loss = trainrun.nn.functional.cross_entropy(out, target)
    assert out.dtype == trainrun.bfloat16 and loss.dtype == trainrun.float32
    loss.backward()
    for p, g in zip(model.parameters(), full):
        assert p.dtype == p.grad.dtype == trainrun.float32
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=0.05, atol=0.02)


def test_nesting_decorator_and_restoring_after_an_error():
    w = trainrun.ones(2, 2)

    @trainrun.autocast("cpu")
    def product(a):
        return a @ w

    assert product(w).dtype == trainrun.bfloat16 and not trainrun.is_autocast_enabled("cpu")
    with trainrun.cpu.amp.autocast():
        assert (w @ w).dtype == trainrun.bfloat16
        with trainrun.autocast("cpu", enabled=False):
            assert (w @ w).dtype == trainrun.float32
        assert trainrun.amp.is_autocast_enabled("cpu")
    with pytest.raises(ZeroDivisionError):
        with trainrun.autocast("cpu"):
            1 / 0
    assert not trainrun.is_autocast_enabled("cpu") and (w @ w).dtype == trainrun.float32
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        with trainrun.autocast("cpu", dtype=trainrun.float64):
            assert (w @ w).dtype == trainrun.float32
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'tpu'"):
        trainrun.autocast("tpu")


def test_grad_scaler_scales_unscales_skips_and_adapts():
    w = trainrun.nn.Parameter(trainrun.ones(3))
    optimizer = trainrun.optim.SGD([w], lr=0.1)
    scaler = trainrun.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    loss = (w * 2).sum()
    scaled = scaler.scale(loss)
    assert scaled.item() == pytest.approx(48.0)
    scaled.backward()
    scaler.unscale_(optimizer)
    assert w.grad.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    assert w.tolist() == pytest.approx([0.8] * 3) and scaler.get_scale() == 8.0
    for expected_scale in (16.0, 8.0):  # a second good step doubles the scale; an inf halves it, step skipped
        optimizer.zero_grad()
        factor = float("inf") if expected_scale == 8.0 else 1.0
        scaler.scale((w * factor).sum()).backward()
        before = w.tolist()
        scaler.step(optimizer)
        scaler.update()
        assert scaler.get_scale() == expected_scale
        if factor == float("inf"):
            assert w.tolist() == before
    state = scaler.state_dict()
    again = trainrun.amp.GradScaler("cpu")
    again.load_state_dict(state)
    assert again.get_scale() == 8.0 and again.state_dict() == state
    off = trainrun.amp.GradScaler("cpu", enabled=False)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert not trainrun.cuda.amp.GradScaler().is_enabled() or trainrun.cuda.is_available()
