"""Training checkpoints as PyTorch writes and reads them: trainrun.save
writes torch.save's zip format (any picklable object with tensors inside)
that both torch.load and trainrun.load read; optimizer state_dict() has
PyTorch's layout and round-trips, including through PyTorch's optimizers;
resuming from a checkpoint continues training exactly."""
import io
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import trainrun as tr  # noqa: E402


def _train(model, opt, steps, seed):
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        x = tr.tensor(rng.standard_normal((8, 4)).astype(np.float32))
        y = tr.tensor(rng.integers(0, 3, size=8))
        loss = tr.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _net():
    return tr.nn.Sequential(tr.nn.Linear(4, 8), tr.nn.ReLU(), tr.nn.Linear(8, 3))


@pytest.mark.parametrize("optimizer", ["SGD", "Adam", "AdamW"])
def test_resuming_from_a_checkpoint_continues_exactly(tmp_path, optimizer):
    make = {"SGD": lambda p: tr.optim.SGD(p, lr=0.1, momentum=0.9),
            "Adam": lambda p: tr.optim.Adam(p, lr=0.01), "AdamW": lambda p: tr.optim.AdamW(p, lr=0.01)}[optimizer]
    tr.manual_seed(0)
    model = _net()
    opt = make(model.parameters())
    _train(model, opt, 3, seed=1)
    path = tmp_path / "ckpt.pt"
    tr.save({"epoch": 3, "model": model.state_dict(), "optimizer": opt.state_dict(), "note": "resume"}, path)
    expected = _train(model, opt, 3, seed=2)

    tr.manual_seed(123)  # different initial weights: the checkpoint must replace them all
    resumed = _net()
    resumed_opt = make(resumed.parameters())
    ckpt = tr.load(path)
    assert ckpt["epoch"] == 3 and ckpt["note"] == "resume"
    assert list(ckpt["model"].keys()) == list(model.state_dict().keys())  # order kept
    resumed.load_state_dict(ckpt["model"])
    resumed_opt.load_state_dict(ckpt["optimizer"])
    assert _train(resumed, resumed_opt, 3, seed=2) == expected


def test_optimizer_state_dict_has_pytorchs_layout():
    w = tr.nn.Parameter(tr.ones(3))
    b = tr.nn.Parameter(tr.zeros(2))
    opt = tr.optim.Adam([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1, betas=(0.8, 0.9))
    (w.sum() + b.sum()).backward()
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert [g["lr"] for g in sd["param_groups"]] == [0.1, 0.5] and sd["param_groups"][0]["betas"] == (0.8, 0.9)
    assert sorted(sd["state"]) == [0, 1] and sorted(sd["state"][0]) == ["exp_avg", "exp_avg_sq", "step"]
    assert sd["state"][0]["step"].item() == 1.0
    fresh = tr.optim.Adam([w])
    with pytest.raises(ValueError, match="parameter groups"):
        fresh.load_state_dict(sd)


def test_save_to_a_file_object_and_safetensors_by_suffix(tmp_path):
    buffer = io.BytesIO()
    tr.save({"x": tr.arange(4), "nested": [tr.ones(2, dtype=tr.float64), 7]}, buffer)
    buffer.seek(0)
    back = tr.load(buffer)
    assert back["x"].tolist() == [0, 1, 2, 3] and back["nested"][1] == 7
    assert back["nested"][0].dtype == tr.float64
    tr.save({"a": tr.ones(2)}, tmp_path / "w.safetensors")
    assert (tmp_path / "w.safetensors").read_bytes()[8:9] == b"{"  # a safetensors header, not a zip
    assert tr.load(tmp_path / "w.safetensors")["a"].tolist() == [1.0, 1.0]


def test_bfloat16_and_views_are_written_whole(tmp_path):
    t = tr.arange(12, dtype=tr.float32).reshape(3, 4)
    view = t.t()[1:]  # non-contiguous, offset
    tr.save({"view": view, "bf16": t.to(tr.bfloat16)}, tmp_path / "c.pt")
    back = tr.load(tmp_path / "c.pt")
    assert back["view"].tolist() == view.tolist()
    assert back["bf16"].dtype == tr.bfloat16 and back["bf16"].float().tolist() == t.tolist()


def test_pytorch_reads_trainrun_checkpoints_and_optimizer_state(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    tr.manual_seed(0)
    model = tr.nn.Linear(4, 3)
    opt = tr.optim.Adam(model.parameters(), lr=0.02)
    _train(model, opt, 2, seed=3)
    tr.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 2}, tmp_path / "c.pt")
    ckpt = torch.load(tmp_path / "c.pt")
    theirs = torch.nn.Linear(4, 3)
    theirs.load_state_dict(ckpt["model"])
    np.testing.assert_array_equal(theirs.weight.detach().numpy(), model.weight.detach().numpy())
    their_opt = torch.optim.Adam(theirs.parameters())
    their_opt.load_state_dict(ckpt["optimizer"])
    assert their_opt.param_groups[0]["lr"] == 0.02
    np.testing.assert_array_equal(their_opt.state_dict()["state"][0]["exp_avg"].numpy(),
                                  opt.state_dict()["state"][0]["exp_avg"].numpy())
    # And back: PyTorch's optimizer state loads into trainrun's.
    torch.save({"optimizer": their_opt.state_dict()}, tmp_path / "t.pt")
    again = tr.optim.Adam(model.parameters())
    again.load_state_dict(tr.load(tmp_path / "t.pt")["optimizer"])
    assert again.param_groups[0]["lr"] == 0.02
