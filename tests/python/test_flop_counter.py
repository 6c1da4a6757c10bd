"""torch.utils.flop_counter.FlopCounterMode and torch.utils.module_tracker.ModuleTracker: per-module counts of a
block (linear layers, a grouped convolution) forward and backward equal PyTorch 2.6's for the same model (the
numbers below were printed by 2.6's FlopCounterMode); attention counts its two products forward and four
backward; a strided, padded convolution counts its real output; a layer whose input needs no gradient still
owns its weight gradient; a custom op counts through custom_mapping; and the global module hooks the tracker
is built on."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun.utils.flop_counter import FlopCounterMode, conv_flop_count, sdpa_flop_count  # noqa: E402
from trainrun.utils.module_tracker import ModuleTracker  # noqa: E402


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_in = nn.Linear(8, 24)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
        self.conv = nn.Conv1d(8, 8, 3, padding=1, groups=2)

    def forward(self, x):
        a = self.attn_in(x)[..., :8]
        return self.mlp(a) + self.conv(a.transpose(1, 2)).transpose(1, 2)


def counts(counter):
    return {module: {str(op): n for op, n in ops.items()} for module, ops in counter.get_flop_counts().items()}


def test_block_counts_equal_pytorch_2_6():
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(2, 5, 8, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        model(x).sum().backward()
    got = counts(counter)
    # Per module, PyTorch 2.6's totals. (Which op a layer's forward runs can differ: on the sliced, non-contiguous
    # input of mlp.0 trainrun's linear runs mm then the bias add, PyTorch's addmm on a copy; the FLOPs are one.)
    totals = {module: sum(ops.values()) for module, ops in got.items()}
    assert totals == {"Global": 34560, "Block": 34560, "Block.attn_in": 3840 + 7680, "Block.mlp": 5120 + 10240,
                      "Block.mlp.0": 2560 + 5120, "Block.mlp.2": 2560 + 5120, "Block.conv": 1920 + 5760}
    assert got["Block.attn_in"] == {"aten.addmm": 3840, "aten.mm": 7680}
    assert got["Block.mlp.2"] == {"aten.addmm": 2560, "aten.mm": 5120}
    assert got["Block.conv"] == {"aten.convolution": 1920, "aten.convolution_backward": 5760}
    assert counter.get_total_flops() == 34560
    assert counter.get_flop_counts()["Global"][torch.ops.aten.addmm] == 6400  # (keys are the ops themselves)


def test_attention_and_strided_convolution():
    q = torch.randn(2, 3, 5, 4, requires_grad=True)
    k, v = torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 6)
    with FlopCounterMode(display=False) as counter:
        F.scaled_dot_product_attention(q, k, v).sum().backward()
    forward = sdpa_flop_count([2, 3, 5, 4], [2, 3, 7, 4], [2, 3, 7, 6])
    assert forward == 2 * 6 * 5 * 4 * 7 + 2 * 6 * 5 * 7 * 6
    assert counter.get_total_flops() >= 2 * forward  # (backward: the scores' and q's gradients at least)
    x, w = torch.randn(2, 3, 11, 9), torch.randn(4, 3, 3, 3)
    with FlopCounterMode(display=False) as counter:
        out = F.conv2d(x, w, stride=2, padding=1)
    assert out.shape == (2, 4, 6, 5)
    assert counter.get_total_flops() == conv_flop_count([2, 3, 11, 9], [4, 3, 3, 3], [2, 4, 6, 5]) == \
        2 * (6 * 5) * 9 * 2 * 4 * 3


def test_first_layer_owns_its_weight_gradient():
    model = nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 2))
    with FlopCounterMode(display=False) as counter:
        model(torch.randn(3, 6)).sum().backward()  # (the input needs no gradient)
    got = counts(counter)
    assert got["Sequential.0"] == {"aten.addmm": 2 * 3 * 6 * 4, "aten.mm": 2 * 3 * 6 * 4}  # forward, dW only
    assert got["Sequential.2"] == {"aten.addmm": 2 * 3 * 4 * 2, "aten.mm": 2 * (2 * 3 * 4 * 2)}  # dX and dW


def test_plain_products_without_modules_and_the_table(capsys):
    with FlopCounterMode(depth=1) as counter:
        torch.mm(torch.randn(3, 4), torch.randn(4, 5))
        torch.bmm(torch.randn(2, 3, 4), torch.randn(2, 4, 5))
        torch.matmul(torch.randn(2, 3, 4), torch.randn(4, 5))
    got = counts(counter)["Global"]
    assert got == {"aten.mm": 120 + 240, "aten.bmm": 240}
    table = capsys.readouterr().out
    assert "Global" in table and "aten.bmm" in table and "600" in table and "100.00%" in table


def test_custom_op_counts_through_custom_mapping():
    @torch.library.custom_op("flops_test::scaled_mm", mutates_args=())
    def scaled_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a @ b) * 2

    def formula(a_shape, b_shape, out_shape=None):
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    with FlopCounterMode(display=False, custom_mapping={torch.ops.flops_test.scaled_mm: formula}) as counter:
        scaled_mm(torch.randn(3, 4), torch.randn(4, 5))
    assert counts(counter)["Global"] == {"flops_test.scaled_mm": 120}  # (its inner mm not counted twice)


def test_module_tracker_parents_forward_and_backward():
    seen = []

    class Spy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, tracker):
            ctx.tracker = tracker
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            seen.append(("bw", set(ctx.tracker.parents), ctx.tracker.is_bw))
            return g, None

    class Probe(nn.Module):
        def __init__(self, tracker):
            super().__init__()
            self.tracker, self.fc = tracker, nn.Linear(3, 3)

        def forward(self, x):
            seen.append(("fw", set(self.tracker.parents), self.tracker.is_bw))
            return Spy.apply(self.fc(x), self.tracker)

    tracker = ModuleTracker()
    model = nn.Sequential(Probe(tracker))
    with tracker:
        model(torch.randn(2, 3, requires_grad=True)).sum().backward()
        assert tracker.parents == {"Global"}  # (the modules' backward scopes closed as their inputs' grads came)
    assert seen == [("fw", {"Global", "Sequential", "Sequential.0"}, False),
                    ("bw", {"Global", "Sequential", "Sequential.0"}, True)]


def test_global_module_hooks():
    from trainrun.nn.modules.module import (register_module_forward_hook, register_module_forward_pre_hook,
                                            register_module_full_backward_hook)
    calls = []
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    handles = [register_module_forward_pre_hook(lambda m, a: calls.append(("pre", type(m).__name__))),
               register_module_forward_hook(lambda m, a, o: calls.append(("post", type(m).__name__))),
               register_module_full_backward_hook(lambda m, gi, go: calls.append(("bw", type(m).__name__)))]
    model(torch.randn(1, 2, requires_grad=True)).sum().backward()
    for h in handles:
        h.remove()
    assert calls[:6] == [("pre", "Sequential"), ("pre", "Linear"), ("post", "Linear"), ("pre", "ReLU"),
                         ("post", "ReLU"), ("post", "Sequential")]
    assert {c for c in calls[6:]} == {("bw", "Sequential"), ("bw", "Linear"), ("bw", "ReLU")}
    calls.clear()
    model(torch.randn(1, 2)).sum()
    assert calls == []
    # a global hook may replace the output, as a module's own may
    h = register_module_forward_hook(lambda m, a, o: o * 0 if isinstance(m, nn.ReLU) else None)
    try:
        assert model(torch.ones(1, 2)).abs().sum().item() == 0
    finally:
        h.remove()
