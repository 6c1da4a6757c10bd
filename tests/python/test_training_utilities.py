"""What the top of a training script calls: seeding and RNG state
(trainrun.random, cuda.manual_seed_all), backends flags, determinism
switches, testing.assert_close (against PyTorch's verdicts), and activation
checkpointing (same gradients as without it, less memory held)."""
import pytest

from built_tree import needs_torch, torch  # trainrun from the source tree; skips when not built

import trainrun  # noqa: E402
from trainrun import nn  # noqa: E402


def test_rng_state_round_trips_both_generators_and_fork_rng_restores_it():
    trainrun.cuda.manual_seed_all(5)
    state = trainrun.get_rng_state()
    first = (trainrun.randn(4), trainrun.randperm(6), trainrun.rand(2))
    trainrun.set_rng_state(state)
    again = (trainrun.randn(4), trainrun.randperm(6), trainrun.rand(2))
    assert all(trainrun.equal(a, b) for a, b in zip(first, again))
    with trainrun.random.fork_rng():
        trainrun.randn(100), trainrun.randperm(9)
    after = (trainrun.randn(3), trainrun.randperm(4))
    trainrun.set_rng_state(state)
    trainrun.randn(4), trainrun.randperm(6), trainrun.rand(2)
    # The draws inside fork_rng did not move the generators: what came after is what comes next here.
    assert all(trainrun.equal(a, b) for a, b in zip(after, (trainrun.randn(3), trainrun.randperm(4))))
    with pytest.raises(RuntimeError, match="CPUGeneratorImplState of size 5056"):
        trainrun.set_rng_state(trainrun.zeros(3, dtype=trainrun.uint8))


def test_the_switches_scripts_set_are_accepted_and_read_back():
    trainrun.backends.cudnn.benchmark = True
    trainrun.backends.cudnn.deterministic = True
    assert trainrun.backends.cudnn.benchmark and trainrun.backends.cudnn.deterministic
    from trainrun.backends import cudnn  # noqa: F401  (importable as a module too)
    trainrun.use_deterministic_algorithms(True, warn_only=True)
    assert trainrun.are_deterministic_algorithms_enabled() and trainrun.is_deterministic_algorithms_warn_only_enabled()
    trainrun.use_deterministic_algorithms(False)
    trainrun.set_float32_matmul_precision("high")
    assert trainrun.get_float32_matmul_precision() == "high"
    trainrun.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError, match="Invalid precision 'fast'"):
        trainrun.set_float32_matmul_precision("fast")


CASES = [  # (actual, expected, options): the same verdict as PyTorch's assert_close
    ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], {}),
    ([1.0, 2.0, 3.0], [1.0, 2.0 + 1e-6, 3.0], {}),
    ([1.0, 2.0, 3.0], [1.0, 2.5, 3.0], {}),
    ([1.0, 2.0, 3.0], [1.0, 2.5, 3.0], {"rtol": 0.3, "atol": 0.0}),
    ([1.0, float("nan")], [1.0, float("nan")], {}),
    ([1.0, float("nan")], [1.0, float("nan")], {"equal_nan": True}),
    ([1, 2], [1, 3], {}),
    ([1.0, 2.0], [1.0, 2.0, 3.0], {}),
]


@needs_torch
@pytest.mark.parametrize("case", range(len(CASES)))
def test_assert_close_agrees_with_pytorch(case):
    actual, expected, options = CASES[case]
    verdicts = []
    for lib in (trainrun, torch):
        try:
            lib.testing.assert_close(lib.tensor(actual), lib.tensor(expected), **options)
            verdicts.append("close")
        except AssertionError as e:
            verdicts.append(str(e).splitlines()[0].replace("torch.", "").replace("trainrun.", ""))
    assert verdicts[0] == verdicts[1]


def test_assert_close_messages_and_containers():
    with pytest.raises(AssertionError, match=r"(?s)Mismatched elements: 1 / 3 \(33.3%\).*at index \(1,\)"):
        trainrun.testing.assert_close(trainrun.tensor([1.0, 2.0, 3.0]), trainrun.tensor([1.0, 2.5, 3.0]))
    with pytest.raises(AssertionError, match="attribute 'dtype' do not match"):
        trainrun.testing.assert_close(trainrun.ones(2), trainrun.ones(2, dtype=trainrun.float64))
    trainrun.testing.assert_close(trainrun.ones(2), trainrun.ones(2, dtype=trainrun.float64), check_dtype=False)
    trainrun.testing.assert_close({"a": [trainrun.ones(1), 2.0]}, {"a": [trainrun.ones(1), 2.0]})
    with pytest.raises(AssertionError, match=r"item \['a'\]\[1\]"):
        trainrun.testing.assert_close({"a": [trainrun.ones(1), 2.0]}, {"a": [trainrun.ones(1), 2.5]})
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        trainrun.testing.assert_close(trainrun.ones(1), trainrun.ones(1), rtol=0.1)


def _mlp(depth=6, width=256):
    trainrun.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU(), nn.Dropout(0.2)]
    return nn.Sequential(*layers)


def test_checkpoint_gives_the_same_gradients_with_dropout_and_holds_less():
    model, x = _mlp(), trainrun.randn(512, 256, requires_grad=True)
    blocks = [model[i:i + 3] for i in range(0, len(model), 3)]

    def run(checkpointed):
        for p in model.parameters():
            p.grad = None
        x.grad = None
        trainrun.manual_seed(1)
        start = trainrun._C._cpu_memory_allocated()
        trainrun._C._cpu_reset_peak_memory_stats()
        h = x
        for block in blocks:
            h = trainrun.utils.checkpoint.checkpoint(block, h, use_reentrant=False) if checkpointed else block(h)
        held = trainrun._C._cpu_memory_allocated() - start  # activations kept for backward
        h.pow(2).mean().backward()
        return held, [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]

    held_plain, grads_plain = run(False)
    held_ckpt, grads_ckpt = run(True)
    for a, b in zip(grads_plain, grads_ckpt):
        trainrun.testing.assert_close(a, b)  # the recomputation drew the same dropout masks
    # (checkpointing keeps each block's input; without it, each Linear's and GELU's input and dropout's mask)
    assert held_ckpt < held_plain / 2, (held_ckpt, held_plain)
    sequential = trainrun.utils.checkpoint.checkpoint_sequential(model, 3, x, use_reentrant=False)
    assert sequential.shape == (512, 256)


def test_non_reentrant_checkpoint_trains_weights_when_no_input_requires_grad():
    trainrun.manual_seed(0)
    lin = nn.Linear(6, 4)
    x = trainrun.randn(3, 6)  # (raw data: no grad)

    def grads_of(fn):
        lin.zero_grad()
        out = fn()
        assert out.requires_grad, "the weights the function reaches require grad, so must its output"
        out.pow(2).sum().backward()
        return lin.weight.grad.clone(), lin.bias.grad.clone()

    want = grads_of(lambda: lin(x).tanh())

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = lin

        def forward(self, t):
            return self.inner(t).tanh()

    holder = Holder()
    ways = {"a module": lambda: trainrun.utils.checkpoint.checkpoint(holder, x, use_reentrant=False),
            "a bound method": lambda: trainrun.utils.checkpoint.checkpoint(holder.forward, x, use_reentrant=False),
            "a closure": lambda: trainrun.utils.checkpoint.checkpoint(lambda t: lin(t).tanh(), x,
                                                                      use_reentrant=False)}
    for way, fn in ways.items():
        got = grads_of(fn)
        for a, b in zip(got, want):
            trainrun.testing.assert_close(a, b, msg=way)
    lin.requires_grad_(False)
    assert not trainrun.utils.checkpoint.checkpoint(holder, x, use_reentrant=False).requires_grad, \
        "frozen weights: nothing requires grad"
    lin.requires_grad_(True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        assert not trainrun.utils.checkpoint.checkpoint(holder, x, use_reentrant=True).requires_grad


def test_torchelastic_module_paths_and_metrics(capsys):
    from trainrun.distributed.elastic import metrics
    from trainrun.distributed.elastic.multiprocessing.errors import record
    assert record is trainrun.distributed.elastic.record
    seen = []

    class Collect(metrics.MetricHandler):
        def emit(self, data):
            seen.append((data.group_name, data.name, data.value))

    metrics.put_metric("dropped", 1.0)  # no handler configured: dropped, as torchelastic's default
    metrics.configure(Collect(), "train")
    metrics.put_metric("tokens_per_s", 1234.5, "train")

    @metrics.prof(group="train")
    def step():
        return 7
    assert step() == 7
    assert seen[0] == ("train", "tokens_per_s", 1234.5)
    assert [name for _, name, _ in seen[1:]] == ["test_torchelastic_module_paths_and_metrics.<locals>.step.success",
                                                 "test_torchelastic_module_paths_and_metrics.<locals>.step.duration.ms"]
    metrics.configure(metrics.ConsoleMetricHandler(), "console")
    metrics.put_metric("loss", 0.5, "console")
    assert "[console]: loss=0.5" in capsys.readouterr().out


def test_checkpoint_wrappers_are_invisible_to_state_dicts_and_keep_gradients():
    """apply_activation_checkpointing wraps the modules check_fn picks (the outermost only) in CheckpointWrapper:
    the model's state dict keys stay the unwrapped model's (so checkpoints load either way), gradients equal the
    unwrapped model's, keywords reach the wrapped forward; offload_wrapper too."""
    from trainrun.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl, CheckpointWrapper, apply_activation_checkpointing, checkpoint_wrapper, offload_wrapper)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))

        def forward(self, x, scale=1.0):
            return x + trainrun.relu(self.inner(x)) * scale

    trainrun.manual_seed(0)
    model = nn.Sequential(Block(), Block(), nn.Linear(4, 2))
    reference = nn.Sequential(Block(), Block(), nn.Linear(4, 2))
    reference.load_state_dict(model.state_dict())
    keys = list(model.state_dict().keys())
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=lambda m: checkpoint_wrapper(
        m, checkpoint_impl=CheckpointImpl.NO_REENTRANT), check_fn=lambda m: isinstance(m, (Block, nn.Linear)))
    assert [type(m).__name__ for m in model] == ["CheckpointWrapper", "CheckpointWrapper", "CheckpointWrapper"]
    assert not isinstance(model[0]._checkpoint_wrapped_module.inner[0], CheckpointWrapper)  # (outermost only)
    assert list(model.state_dict().keys()) == keys
    assert [n for n, _ in model[0].named_parameters()][0] == "inner.0.weight"
    x = trainrun.randn(3, 4, requires_grad=True)
    model(x).pow(2).sum().backward()
    reference(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert trainrun.allclose(p.grad, q.grad, atol=1e-6)
    model.load_state_dict(reference.state_dict())
    assert trainrun.allclose(model[0](x, scale=2.0), reference[0](x, scale=2.0))
    offloaded = offload_wrapper(Block())
    offloaded(x).sum().backward()
    assert all(p.grad is not None for p in offloaded.parameters())


def test_record_takes_an_error_handler_and_schedules_are_found_by_name():
    from trainrun.distributed.elastic.multiprocessing.errors import ErrorHandler, record
    from trainrun.distributed.pipelining.schedules import Schedule1F1B, get_schedule_class
    calls = []

    class Remember(ErrorHandler):
        def initialize(self):
            calls.append("initialize")

        def record_exception(self, e):
            calls.append(f"recorded {type(e).__name__}: {e}")

    @record
    def fine():
        return 3

    def fails():
        raise KeyError("no batch")

    assert fine() == 3
    with pytest.raises(KeyError):
        record(fails, error_handler=Remember())()
    assert calls == ["initialize", "recorded KeyError: 'no batch'"]
    assert get_schedule_class(schedule_name="1f1b") is Schedule1F1B
