"""The distributed checkpoint's other formats: one torch.save file and back (format_utils, nesting kept,
read and written by PyTorch 1.13 too), values that differ between ranks saved per rank, and folders PyTorch
2.6's own DCP wrote (tests/python/data), read whole and loaded into another sharding, their pickled metadata
refused when it names other code."""
import os
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))

from checkpoint_state import _expected, _fsdp_model, _model, _set_expected  # noqa: E402


def save_nested_fsdp_state(folder):
    """FSDP on 2 ranks: the model, an AdamW state after one step, and plain values, nested."""
    import trainrun as tr
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint.state_dict import get_optimizer_state_dict
    dist.init_process_group("gloo")
    model = _fsdp_model(expected_values=True)
    optimizer = tr.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.0)  # first step: each weight moves by lr
    model(tr.ones(4, 10)).sum().backward()
    optimizer.step()
    dcp.save({"model": model.state_dict(), "optim": get_optimizer_state_dict(model, optimizer), "step": 7,
              "extra": {"names": ["a", "b"], "dotted.key": 1.5}}, checkpoint_id=folder)
    dist.destroy_process_group()


def test_dcp_to_torch_save_and_back(ranks, tmp_path):
    """A checkpoint saved sharded on 2 ranks becomes one torch.save file of full tensors with the state dict's
    own nesting (dotted keys kept apart from nesting), and that file becomes a checkpoint again that loads."""
    import trainrun as tr
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp
    ranks.run_function(2, save_nested_fsdp_state, str(tmp_path / "sharded"))
    dcp_to_torch_save(tmp_path / "sharded", tmp_path / "whole.pt")
    whole = tr.load(str(tmp_path / "whole.pt"))
    assert sorted(whole) == ["extra", "model", "optim", "step"]
    assert whole["step"] == 7 and whole["extra"] == {"names": ["a", "b"], "dotted.key": 1.5}
    assert sorted(whole["model"]) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    for name, t in whole["model"].items():  # full tensors, not shards: moved by one AdamW step from the values
        assert tuple(t.shape) == _expected(name, tuple(t.shape)).shape
        assert np.abs(t.numpy() - _expected(name, tuple(t.shape))).max() == pytest.approx(0.1, rel=1e-3), name
    assert whole["optim"]["param_groups"][0]["lr"] == 0.1
    # And back: the torch.save file as a checkpoint, loaded into a model of one process.
    torch_save_to_dcp(tmp_path / "whole.pt", tmp_path / "again")
    model = _model()
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=str(tmp_path / "again"))
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.detach().numpy(), whole["model"][name].numpy(), err_msg=name)


def test_the_torch_save_file_is_read_by_pytorch_and_pytorchs_by_us(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    import trainrun as tr
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp
    model = _model()
    _set_expected(model)
    dcp.save({"model": model.state_dict(), "step": 3}, checkpoint_id=str(tmp_path / "ours"), no_dist=True)
    dcp_to_torch_save(tmp_path / "ours", tmp_path / "ours.pt")
    theirs = torch.load(str(tmp_path / "ours.pt"))
    assert theirs["step"] == 3
    np.testing.assert_array_equal(theirs["model"]["2.weight"].numpy(), _expected("2.weight", (7, 13)))
    # A file torch.save wrote, as a checkpoint.
    torch.save({"model": {"0.weight": torch.tensor(_expected("0.weight", (13, 10)))}, "epoch": 5},
               str(tmp_path / "theirs.pt"))
    torch_save_to_dcp(tmp_path / "theirs.pt", tmp_path / "from_torch")
    state = {"model": {"0.weight": tr.zeros(13, 10)}, "epoch": 0}
    dcp.load(state, checkpoint_id=str(tmp_path / "from_torch"))
    assert state["epoch"] == 5
    np.testing.assert_array_equal(state["model"]["0.weight"].numpy(), _expected("0.weight", (13, 10)))


def test_converters_refuse_what_they_cannot_convert(tmp_path):
    import trainrun as tr
    from trainrun.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp
    with pytest.raises(FileNotFoundError, match="does not exist"):
        dcp_to_torch_save(tmp_path / "missing", tmp_path / "x.pt")
    tr.save(tr.ones(3), str(tmp_path / "tensor.pt"))
    with pytest.raises(TypeError, match="holds a Tensor, not a state dict"):
        torch_save_to_dcp(tmp_path / "tensor.pt", tmp_path / "out")


def load_torch_save_file_into_fsdp(path):
    """PyTorch's way to load one torch.save file into a sharded model: BroadcastingTorchSaveReader (rank 0
    reads, every rank keeps its shard) with DynamicMetaLoadPlanner. A file that cannot fill the state dict is
    an error on both ranks."""
    import trainrun as tr
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint.format_utils import BroadcastingTorchSaveReader, DynamicMetaLoadPlanner
    dist.init_process_group("gloo")
    model = _fsdp_model(expected_values=False)
    state = {"model": model.state_dict(), "step": 0}
    dcp.load(state, checkpoint_id=path, storage_reader=BroadcastingTorchSaveReader(),
             planner=DynamicMetaLoadPlanner())
    assert state["step"] == 5
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.full_tensor().detach().numpy(), _expected(name, tuple(p.shape)),
                                      err_msg=name)
    for bad, message in (({"model": {}}, "it has no \\['model.0.weight'\\] \\(it holds no entries\\)"),
                         ({"model": {"0.weight": tr.zeros(2, 2)}}, "'model.0.weight' is \\(2, 2\\) in the file")):
        if dist.get_rank() == 0:
            tr.save(bad, path + ".bad")
        dist.barrier()
        try:
            dcp.load({"model": {"0.weight": model.state_dict()["0.weight"]}}, checkpoint_id=path + ".bad",
                     storage_reader=BroadcastingTorchSaveReader(), planner=DynamicMetaLoadPlanner())
            raise AssertionError("a file that cannot fill the state dict loaded")
        except RuntimeError as e:
            import re
            assert re.search(message, str(e)), str(e)
        dist.barrier()
    dist.destroy_process_group()


def test_a_torch_save_file_loads_into_a_sharded_model(ranks, tmp_path):
    import trainrun as tr
    model = _model()
    _set_expected(model)
    tr.save({"model": model.state_dict(), "step": 5}, str(tmp_path / "whole.pt"))
    ranks.run_function(2, load_torch_save_file_into_fsdp, str(tmp_path / "whole.pt"))


def test_the_command_line_converts_both_ways(tmp_path):
    """`python -m torch.distributed.checkpoint.format_utils MODE SRC DST`, as PyTorch's DCP tutorial runs it."""
    import subprocess
    import trainrun as tr
    tr.save({"w": tr.arange(6.0).view(2, 3), "step": 3}, str(tmp_path / "model.pt"))
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(tr.__file__).resolve().parents[1]))

    def convert(*args):
        return subprocess.run([sys.executable, "-m", "trainrun.distributed.checkpoint.format_utils", *map(str, args)],
                              capture_output=True, text=True, env=env, timeout=120)
    out = convert("torch_to_dcp", tmp_path / "model.pt", tmp_path / "dcp")
    assert out.returncode == 0 and "using method: 'torch_to_dcp'" in out.stdout, out.stderr
    assert convert("dcp_to_torch", tmp_path / "dcp", tmp_path / "again.pt").returncode == 0
    again = tr.load(str(tmp_path / "again.pt"))
    assert tr.equal(again["w"], tr.arange(6.0).view(2, 3)) and again["step"] == 3
    missing = convert("dcp_to_torch", tmp_path / "nothing", tmp_path / "x.pt")
    assert missing.returncode == 0 and "No checkpoint found at" in missing.stdout
    assert convert("sideways", tmp_path / "dcp", tmp_path / "x.pt").returncode == 2  # argparse names the choices


class _Loader:
    """A Stateful data loader position: different on every rank."""

    def __init__(self, position):
        self.position = position

    def state_dict(self):
        return {"position": self.position, "epoch": 2}

    def load_state_dict(self, state):
        self.position = state["position"]


def save_per_rank_values(folder):
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dcp.save({"loader": _Loader(100 + 7 * rank), "seed": [rank, rank * 2], "step": 5}, checkpoint_id=folder)
    dist.destroy_process_group()


def load_per_rank_values(folder):
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    loader, state = _Loader(0), {"seed": [0, 0], "step": 0}
    state["loader"] = loader
    dcp.load(state, checkpoint_id=folder)
    assert loader.position == 100 + 7 * rank and state["seed"] == [rank, rank * 2] and state["step"] == 5, state
    dist.destroy_process_group()


def test_values_that_differ_between_ranks_come_back_to_each_rank(ranks, tmp_path):
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint import _metadata
    from trainrun.distributed.checkpoint.format_utils import load_whole
    folder = str(tmp_path / "ckpt")
    ranks.run_function(2, save_per_rank_values, folder)
    items = _metadata.read(folder).items
    assert items["loader.position"].WhichOneof("kind") == "per_rank"
    assert list(items["loader.position"].per_rank.json) == ["100", "107"]
    assert items["loader.epoch"].WhichOneof("kind") == "json" and items["step"].json == "5"  # the same: once
    ranks.run_function(2, load_per_rank_values, folder)
    # On another number of ranks no rank's value is its own: refused, naming the value and both counts.
    with pytest.raises(ValueError, match="'loader.position' was saved per rank by 2 ranks .*; 1 rank"):
        dcp.load({"loader": _Loader(0), "seed": [0, 0], "step": 0}, checkpoint_id=folder, no_dist=True)
    # The converter keeps every rank's.
    whole = load_whole(folder)
    # (seed.0 and seed.1 are items of their own: each is the list of the ranks' values)
    assert whole["loader"] == {"position": [100, 107], "epoch": 2} and whole["seed"] == [[0, 1], [0, 2]]


PYTORCH_DCP = pathlib.Path(__file__).resolve().parent / "data"  # written by PyTorch 2.6 (make_pytorch26_dcp.py)


def test_a_folder_pytorchs_dcp_wrote_is_read_whole():
    from trainrun.distributed.checkpoint.format_utils import load_whole
    one = load_whole(PYTORCH_DCP / "pytorch26_dcp")
    assert one["step"] == 7 and one["extra"]["name"] == "run-a"
    np.testing.assert_array_equal(one["model"]["0.weight"].numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(one["model"]["0.bias"].numpy(), np.array([1.5, -2.0, 3.25]))
    assert one["model"]["0.bias"].numpy().dtype == np.float64
    np.testing.assert_array_equal(one["extra"]["ids"].numpy(), np.arange(5))
    # Saved from 2 ranks: w as Shard(0) pieces of 4 and 3 rows, b replicated.
    sharded = load_whole(PYTORCH_DCP / "pytorch26_dcp_sharded")
    np.testing.assert_array_equal(sharded["model"]["w"].numpy(), np.arange(21, dtype=np.float32).reshape(7, 3))
    assert sharded["meta"] == {"tag": "sharded", "lrs": [0.1, 0.01]} and sharded["step"] == 11


def load_pytorch_dcp_sharded(folder):
    """Loads PyTorch's 2-rank checkpoint into a DTensor sharded the other way (Shard(1) over 3 columns)."""
    import trainrun as tr
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import Shard, distribute_tensor
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (2,))
    w = distribute_tensor(tr.zeros(7, 3), mesh, [Shard(1)])
    state = {"model": {"w": w, "b": tr.zeros(2)}, "step": 0, "meta": {"tag": "", "lrs": [0.0, 0.0]}}
    dcp.load(state, checkpoint_id=folder)
    np.testing.assert_array_equal(w.full_tensor().numpy(), np.arange(21, dtype=np.float32).reshape(7, 3))
    assert state["step"] == 11 and state["meta"]["lrs"] == [0.1, 0.01]
    np.testing.assert_array_equal(state["model"]["b"].numpy(), np.array([0.5, 1.5], dtype=np.float32))
    dist.destroy_process_group()


def test_dcp_load_reads_pytorchs_folder_into_another_sharding(ranks):
    ranks.run_function(2, load_pytorch_dcp_sharded, str(PYTORCH_DCP / "pytorch26_dcp_sharded"))


def test_pytorch_metadata_that_names_other_code_is_refused(tmp_path):
    import pickle
    import trainrun as tr
    import trainrun.distributed.checkpoint as dcp
    folder = tmp_path / "evil"
    folder.mkdir()

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "ran"),))
    (folder / ".metadata").write_bytes(pickle.dumps(Evil(), protocol=4))
    with pytest.raises(pickle.UnpicklingError, match="names posix.system, which is not read"):
        dcp.load({"x": tr.zeros(1)}, checkpoint_id=str(folder))
    assert not (tmp_path / "ran").exists()
