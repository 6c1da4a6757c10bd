"""torch.export with inputs that are containers (PyTorch's pytrees): a dict batch, nested lists and tuples, a
named tuple, a registered dataclass, a non-tensor leaf (specialized), containers as keyword inputs; the program's
inputs are the leaves, named by their path; calls with the same structure (dict keys in any order) run it, a
different structure is refused naming it; dynamic_shapes mirror the structure; save/load and aot_load keep it."""
import dataclasses
from collections import namedtuple

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun.export import Dim, InputMismatchError  # noqa: E402

Pair = namedtuple("Pair", ["left", "right"])


@dataclasses.dataclass
class Batch:
    tokens: torch.Tensor
    mask: torch.Tensor


class DictModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, batch, extra=None):
        out = self.linear(batch["x"]) * batch["scale"] + batch["y"]
        return out if extra is None else out + extra[0] - extra[1]


def test_dict_input_leaves_names_and_calls():
    torch.manual_seed(0)
    model = DictModel()
    x, y = torch.randn(5, 4), torch.randn(5, 3)
    ep = torch.export.export(model, ({"x": x, "y": y, "scale": 2.0},))
    assert ep.graph_signature.user_inputs == ["batch_x", "batch_y"]  # (scale: a number, the program's constant)
    assert torch.allclose(ep.module()({"x": x, "y": y, "scale": 2.0}), model({"x": x, "y": y, "scale": 2.0}))
    x2 = torch.randn(5, 4)
    assert torch.allclose(ep({"y": y, "x": x2, "scale": 2.0}), model({"x": x2, "y": y, "scale": 2.0}))  # key order
    with pytest.raises(InputMismatchError, match="exported structure"):
        ep({"x": x, "scale": 2.0})
    with pytest.raises(RuntimeError, match="scale"):
        ep({"x": x, "y": y, "scale": 3.0})


def test_nested_sequences_keywords_and_named_tuples():
    torch.manual_seed(0)
    model = DictModel()
    x, y = torch.randn(2, 4), torch.randn(2, 3)
    extra = [torch.ones(2, 3), torch.full((2, 3), 0.5)]
    ep = torch.export.export(model, ({"x": x, "y": y, "scale": 1.0},), {"extra": extra})
    assert ep.graph_signature.user_inputs == ["batch_x", "batch_y", "extra_0", "extra_1"]
    assert torch.allclose(ep({"x": x, "y": y, "scale": 1.0}, extra=extra),
                          model({"x": x, "y": y, "scale": 1.0}, extra=extra))

    class PairModel(torch.nn.Module):
        def forward(self, pair, scales):
            return pair.left * scales[0] + pair.right * scales[1][0]
    pair, scales = Pair(torch.randn(3), torch.randn(3)), (torch.tensor(2.0), [torch.tensor(3.0)])
    ep2 = torch.export.export(PairModel(), (pair, scales))
    assert ep2.graph_signature.user_inputs == ["pair_left", "pair_right", "scales_0", "scales_1_0"]
    assert torch.allclose(ep2(pair, scales), PairModel()(pair, scales))


def test_registered_dataclass_and_dynamic_shapes():
    torch.export.register_dataclass(Batch, serialized_type_name="test.Batch")

    class Masked(torch.nn.Module):
        def forward(self, batch):
            return (batch.tokens * batch.mask).sum(-1)
    b = Batch(torch.randn(4, 6), torch.ones(4, 6))
    rows = Dim("rows", max=64)
    ep = torch.export.export(Masked(), (b,), dynamic_shapes=({"tokens": {0: rows}, "mask": {0: rows}},))
    assert ep.graph_signature.user_inputs == ["batch_tokens", "batch_mask"]
    other = Batch(torch.randn(9, 6), (torch.rand(9, 6) > 0.5).float())
    assert torch.allclose(ep(other), Masked()(other))
    with pytest.raises(TypeError, match="not a dataclass"):
        torch.export.register_dataclass(int)


def test_save_load_and_aot_load_keep_the_structure(tmp_path):
    torch.manual_seed(0)
    model = DictModel()
    x, y = torch.randn(5, 4), torch.randn(5, 3)
    batch = {"x": x, "y": y, "scale": 2.0}
    ep = torch.export.export(model, (batch,))
    path = tmp_path / "dict_model.pt2"
    torch.export.save(ep, str(path))
    loaded = torch.export.load(str(path))
    assert torch.allclose(loaded({"y": y, "x": x, "scale": 2.0}), model(batch), atol=1e-6)
    runner = torch.export.aot_load(str(path))
    assert torch.allclose(runner(batch), model(batch), atol=1e-6)
    with pytest.raises(InputMismatchError, match="exported structure"):
        runner({"x": x})
