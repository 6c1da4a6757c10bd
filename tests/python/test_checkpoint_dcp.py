"""The distributed checkpoint (trainrun.distributed.checkpoint): saved from
FSDP on 4 ranks and loaded into FSDP on 2, tensor parallelism on 2 and one
process (resharding), bitwise; replicated tensors written once; a save that
dies leaves nothing loadable at its path; corrupted, truncated, uncommitted or
foreign-version folders are refused by name with nothing loaded."""
import os
import pathlib
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))


def _model():
    from trainrun import nn
    import trainrun as tr
    tr.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 13), nn.ReLU(), nn.Linear(13, 7))  # 13 and 7 rows: uneven shards


def _fsdp_model(expected_values):
    """The model sharded as FSDP2 recipes do: each Linear, then the root."""
    from trainrun.distributed.fsdp import fully_shard
    model = _model()
    if expected_values:
        _set_expected(model)
    fully_shard(model[0])
    fully_shard(model[2])
    fully_shard(model)
    return model


def _expected(name, shape):
    """Position- and name-dependent values, so a piece read from the wrong place shows."""
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float32).reshape(shape) * 0.001 + (zlib.crc32(name.encode()) % 97)).astype(np.float32)


def _set_expected(model):
    import trainrun as tr
    with tr.no_grad():
        for name, p in model.named_parameters():
            p.copy_(tr.tensor(_expected(name, tuple(p.shape))))


def _check_expected(tensors, full):
    for name, p in tensors.items():
        got = full(p).detach().numpy()
        np.testing.assert_array_equal(got, _expected(name, got.shape), err_msg=name)


def save_from_fsdp(folder):
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    model = _fsdp_model(expected_values=True)
    dcp.save({"model": model.state_dict(), "step": 42, "note": {"lr": 0.5}}, checkpoint_id=folder)
    dist.destroy_process_group()


def load_into_fsdp(folder):
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    model = _fsdp_model(expected_values=False)
    state = {"model": model.state_dict(), "step": 0, "note": {"lr": 0.0}}
    dcp.load(state, checkpoint_id=folder)  # in place: FSDP's state dict views the shards
    assert state["step"] == 42 and state["note"] == {"lr": 0.5}, state
    _check_expected(model.state_dict(), lambda p: p.full_tensor())
    dist.destroy_process_group()


def load_into_tensor_parallel(folder):
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    dist.init_process_group("gloo")
    model = _model()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    state = {"model": model.state_dict(), "step": 0}  # DTensors for the sharded parameters, as PyTorch's
    dcp.load(state, checkpoint_id=folder)
    _check_expected(model.state_dict(), lambda p: p.full_tensor() if hasattr(p, "full_tensor") else p)
    # The model's helpers: a full state dict (gathered), only on rank 0 with cpu_offload; and back.
    from trainrun.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                            set_model_state_dict)
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    _check_expected(full, lambda p: p)
    offloaded = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    assert (len(offloaded) == 4) == (dist.get_rank() == 0), offloaded.keys()
    fresh = _model()
    parallelize_module(fresh, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    set_model_state_dict(fresh, offloaded, options=StateDictOptions(full_state_dict=True,
                                                                    broadcast_from_rank0=True))
    _check_expected(fresh.state_dict(), lambda p: p.full_tensor() if hasattr(p, "full_tensor") else p)
    # Local shards passed as plain tensors would lose all but one rank's piece: refused by name, whether the
    # shapes differ (13 rows split 7 + 6) or only the values do (8 elements split 4 + 4).
    import trainrun as tr
    from trainrun.distributed.tensor import Shard, distribute_tensor
    even = distribute_tensor(tr.arange(8.0), mesh, [Shard(0)]).to_local()
    for name, piece in (("w0", model[0].weight.to_local()), ("even", even)):
        try:
            dcp.save({name: piece}, checkpoint_id=folder + "_bad")
            raise AssertionError(f"{name}: a tensor split over ranks was saved as a plain tensor")
        except ValueError as e:
            assert f"'{name}' differs between rank 0" in str(e) and "must be a DTensor" in str(e), e
    dist.destroy_process_group()


def save_replicated(folder):
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    model = _model()
    _set_expected(model)
    state = {"model": model.state_dict()}
    state["model"].update({f"extra.{i}": _tensor(_expected(f"extra.{i}", (64, 64))) for i in range(8)})
    dcp.save(state, checkpoint_id=folder)
    dist.destroy_process_group()


def _tensor(array):
    import trainrun as tr
    return tr.tensor(array)


def save_and_die(folder):
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        import trainrun.distributed.checkpoint._data_files as data_files
        original = data_files.write_data_file

        def dies_after_writing(path, pieces):
            original(path, pieces)
            os._exit(9)  # SIGKILL-like: no cleanup, no barrier
        data_files.write_data_file = dies_after_writing
    model = _model()
    _set_expected(model)
    dcp.save({"model": model.state_dict()}, checkpoint_id=folder)


def async_save_then_train(folder):
    """async_save returns after staging; the training that goes on meanwhile does not leak into the save."""
    import trainrun as tr
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    model = _fsdp_model(expected_values=True)
    # The background writer waits until training has changed the parameters: only the staging copy made
    # during the call keeps the saved values those of the call.
    import threading
    import trainrun.distributed.checkpoint._data_files as data_files
    trained, original = threading.Event(), data_files.write_data_file

    def after_training(path, pieces):
        assert trained.wait(30), "training did not go on while the save was pending"
        return original(path, pieces)
    data_files.write_data_file = after_training
    future = dcp.async_save({"model": model.state_dict(), "step": 1}, checkpoint_id=folder)
    optimizer = tr.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(3):  # training goes on while the background thread writes
        model(tr.ones(4, 10)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    trained.set()
    future.result()
    data_files.write_data_file = original
    second = dcp.async_save({"model": model.state_dict(), "step": 4}, checkpoint_id=folder + "_4")
    fresh = _fsdp_model(expected_values=False)
    state = {"model": fresh.state_dict(), "step": 0}
    dcp.load(state, checkpoint_id=folder)
    assert state["step"] == 1
    _check_expected(fresh.state_dict(), lambda p: p.full_tensor())  # the values at the time of the call
    second.result()
    dist.destroy_process_group()


def test_async_save_writes_the_state_at_the_call(ranks, tmp_path):
    ranks.run_function(2, async_save_then_train, str(tmp_path / "async"))
    assert (tmp_path / "async_4" / ".committed").exists()


def test_fsdp_on_4_ranks_loads_into_fsdp_on_2_tensor_parallel_and_one_process(ranks, tmp_path):
    folder = str(tmp_path / "step_42")
    ranks.run_function(4, save_from_fsdp, folder)
    assert sorted(os.listdir(folder))[:2] == [".committed", ".metadata"]
    ranks.run_function(2, load_into_fsdp, folder)
    ranks.run_function(2, load_into_tensor_parallel, folder)
    # One process, no process group: the documented pattern (load, then load_state_dict).
    import trainrun.distributed.checkpoint as dcp
    model = _model()
    state = {"model": model.state_dict(), "step": 0, "note": {}}
    dcp.load(state, checkpoint_id=folder)
    model.load_state_dict(state["model"])
    _check_expected(dict(model.named_parameters()), lambda p: p)
    with pytest.raises(KeyError, match="has no 'optim'"):
        dcp.load({"optim": model.state_dict()["0.weight"]}, checkpoint_id=folder)


def test_replicated_tensors_are_written_once_and_the_writes_balanced(ranks, tmp_path):
    folder = tmp_path / "replicated"
    ranks.run_function(4, save_replicated, str(folder))
    files = sorted(folder.glob("__*.safetensors"))
    sizes = [f.stat().st_size for f in files]
    unique = sum(_expected("x", s).nbytes for s in [(13, 10), (13,), (7, 13), (7,)]) + 8 * 64 * 64 * 4
    assert unique <= sum(sizes) <= unique * 1.01 + 4096 * len(files), (sizes, unique)  # headers aside
    assert len(files) == 4 and max(sizes) <= 1.3 * (sum(sizes) / len(sizes)), sizes


def test_a_save_that_dies_leaves_nothing_loadable_and_the_previous_one_intact(ranks, tmp_path):
    ranks.run_function(2, save_replicated, str(tmp_path / "previous"))
    run = ranks.run_function(2, save_and_die, str(tmp_path / "next"), check=False, deadline=60)
    assert run.returncode != 0
    import trainrun.distributed.checkpoint as dcp
    assert not (tmp_path / "next").exists()  # only next.partial, never at the checkpoint's path
    with pytest.raises(FileNotFoundError, match="does not exist"):
        dcp.load({"model": _model().state_dict()}, checkpoint_id=str(tmp_path / "next"))
    model = _model()
    state = {"model": model.state_dict()}
    del state["model"]["0.bias"]
    dcp.load(state, checkpoint_id=str(tmp_path / "previous"))
    np.testing.assert_array_equal(state["model"]["0.weight"].numpy(), _expected("0.weight", (13, 10)))


# Where a save can die, and who dies there: (point, rank). Each point is a function of the save that the dying
# rank's copy replaces with one that exits at once (os._exit: no cleanup, no barrier, as SIGKILL).
CRASH_POINTS = [
    ("before writing its data file", 1), ("before writing its data file", 0),
    ("half way through its data file", 1), ("half way through its data file", 0),
    ("after writing its data file", 1), ("after writing its data file", 0),
    ("before the metadata", 0), ("after the metadata, before the commit marker", 0),
    ("after the commit marker, before the rename", 0),
    ("between moving the old checkpoint aside and the rename", 0),
    ("after the rename, before the last barrier", 0),
]


def save_twice_and_die(folder, point, dying_rank):
    """Saves the state with values v1 at folder, then (the same folder: saving over it) with values v2, dying at
    `point` on `dying_rank` during the second save."""
    import trainrun as tr
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint import _data_files, _metadata, _save
    dist.init_process_group("gloo")
    model = _fsdp_model(expected_values=True)
    dcp.save({"model": model.state_dict(), "step": 1}, checkpoint_id=folder)
    with tr.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    if dist.get_rank() == int(dying_rank):
        write_data, write_metadata, commit = _data_files.write_data_file, _metadata.write, _save._commit

        def die():
            os._exit(9)

        def data_file(path, pieces):
            if point == "before writing its data file":
                die()
            if point == "half way through its data file":
                locations = write_data(path, pieces)
                with open(path, "r+b") as f:
                    f.truncate(os.path.getsize(path) // 2)
                die()
            locations = write_data(path, pieces)
            if point == "after writing its data file":
                die()
            return locations

        def metadata(folder_, meta):
            if point == "before the metadata":
                die()
            write_metadata(folder_, meta)

        def commit_(partial, final):
            if point == "after the commit marker, before the rename":
                die()
            if point == "between moving the old checkpoint aside and the rename":
                os.rename(final, final + ".old")
                die()
            commit(partial, final)
            if point == "after the rename, before the last barrier":
                die()

        _data_files.write_data_file, _metadata.write, _save._commit = data_file, metadata, commit_
        if point == "after the metadata, before the commit marker":
            real_open = open

            def open_(path, *args, **kwargs):  # the marker is the one file _write opens by name
                if str(path).endswith(_metadata.COMMIT_MARKER):
                    die()
                return real_open(path, *args, **kwargs)
            _save.open = open_
    dcp.save({"model": model.state_dict(), "step": 2}, checkpoint_id=folder)
    dist.destroy_process_group()


@pytest.mark.parametrize("point,dying_rank", CRASH_POINTS, ids=[f"rank{r} {p}" for p, r in CRASH_POINTS])
def test_a_save_killed_at_any_point_leaves_a_whole_checkpoint(ranks, tmp_path, point, dying_rank):
    """Saving over a checkpoint, one rank dies somewhere in the save: loading that path then gives either the
    previous state whole (step 1) or, once the new one was committed and in place, the new one whole (step 2),
    never a mix and never an error."""
    import trainrun.distributed.checkpoint as dcp
    folder = str(tmp_path / "ckpt")
    run = ranks.run_function(2, save_twice_and_die, folder, point, str(dying_rank), check=False, deadline=90)
    assert run.returncode != 0
    committed = point == "after the rename, before the last barrier"
    # The second save got as far as the point: what it left on disk says so.
    if point == "between moving the old checkpoint aside and the rename":
        assert not os.path.exists(folder) and os.path.exists(folder + ".old") and os.path.exists(folder + ".partial")
    elif not committed:
        assert os.path.exists(folder) and os.path.exists(folder + ".partial"), run.failure_text()
    model = _model()
    state = {"model": model.state_dict(), "step": 0}
    dcp.load(state, checkpoint_id=folder)
    assert state["step"] == (2 if committed else 1), point
    for name, p in model.named_parameters():
        want = _expected(name, tuple(p.shape)) + (1.0 if committed else 0.0)
        np.testing.assert_array_equal(p.detach().numpy(), want.astype(np.float32), err_msg=f"{point}: {name}")


def test_bad_checkpoints_are_refused_by_name_and_load_nothing(tmp_path):
    import trainrun as tr
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint import _metadata
    model = _model()
    _set_expected(model)
    dcp.save({"model": model.state_dict(), "step": 3}, checkpoint_id=str(tmp_path / "good"))

    def fresh():
        return {"model": {k: tr.zeros(list(v.shape)) for k, v in model.state_dict().items()}, "step": 0}

    def copy_of_good(name):
        import shutil
        shutil.copytree(tmp_path / "good", tmp_path / name)
        return tmp_path / name

    data = next(copy_of_good("flipped").glob("__*"))
    raw = bytearray(data.read_bytes())
    raw[-3] ^= 0x40
    data.write_bytes(bytes(raw))
    truncated = next(copy_of_good("truncated").glob("__*"))
    truncated.write_bytes(truncated.read_bytes()[:-10])
    os.remove(copy_of_good("uncommitted") / _metadata.COMMIT_MARKER)
    os.remove(copy_of_good("no_metadata") / _metadata.METADATA_FILE)
    foreign = copy_of_good("foreign")
    meta = _metadata.read(str(foreign))
    meta.format_version = 99
    (foreign / _metadata.METADATA_FILE).write_bytes(meta.SerializeToString())
    cases = {"flipped": "is corrupted (CRC-32C mismatch", "truncated": "is truncated", "uncommitted": "not committed",
             "no_metadata": "has no .metadata", "foreign": "format version 99"}
    for name, message in cases.items():
        state = fresh()
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            dcp.load(state, checkpoint_id=str(tmp_path / name))
        assert state["step"] == 0 and all(not v.any().item() for v in state["model"].values()), \
            f"{name}: something was loaded"
    state = fresh()
    state["model"]["0.weight"] = tr.zeros(13, 11)
    with pytest.raises(ValueError, match=r"'model.0.weight' is \[13, 10\] in checkpoint .* but \[13, 11\]"):
        dcp.load(state, checkpoint_id=str(tmp_path / "good"))
    state = fresh()
    state["model"]["0.weight"] = tr.zeros(13, 10, dtype=tr.float64)
    with pytest.raises(TypeError, match="is float32 in checkpoint .* but float64"):
        dcp.load(state, checkpoint_id=str(tmp_path / "good"))


# ---- optimizer state ----------------------------------------------------------------------------------------
def _train_two_steps(model):
    import trainrun as tr
    optimizer = tr.optim.AdamW(model.parameters(), lr=0.05)
    for step in range(2):
        tr.manual_seed(100 + step)
        model(tr.randn(4, 10)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    return optimizer


def _full_optimizer_state(model, optimizer):
    from trainrun.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict
    state = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True))
    return {name: {k: np.asarray(v.tolist()) for k, v in entries.items()} for name, entries in state["state"].items()}


def save_fsdp_with_optimizer(folder):
    """2 ranks of FSDP train 2 steps and save model and optimizer sharded; rank 0 also writes the optimizer
    state gathered whole, the reference."""
    import pickle
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint.state_dict import get_state_dict
    dist.init_process_group("gloo")
    model = _fsdp_model(expected_values=False)
    optimizer = _train_two_steps(model)
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=folder)
    reference = _full_optimizer_state(model, optimizer)
    if dist.get_rank() == 0:
        with open(folder + ".reference", "wb") as f:
            pickle.dump(reference, f)
    dist.destroy_process_group()


def _load_and_compare(model, folder):
    import pickle
    import trainrun as tr
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    optimizer = tr.optim.AdamW(model.parameters(), lr=0.5)
    model_state, optim_state = get_state_dict(model, optimizer)  # a fresh optimizer's state is created here
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=folder)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    with open(folder + ".reference", "rb") as f:
        reference = pickle.load(f)
    got = _full_optimizer_state(model, optimizer)
    assert sorted(got) == sorted(reference) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    for name in reference:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            np.testing.assert_allclose(got[name][key], reference[name][key], rtol=1e-6, err_msg=f"{name}.{key}")
    assert optimizer.param_groups[0]["lr"] == 0.05  # the saved group options come back too


def load_fsdp_with_optimizer(folder):
    import trainrun.distributed as dist
    dist.init_process_group("gloo")
    _load_and_compare(_fsdp_model(expected_values=False), folder)
    dist.destroy_process_group()


def test_optimizer_state_saved_from_fsdp_loads_on_other_rank_counts(ranks, tmp_path):
    folder = str(tmp_path / "with_optimizer")
    ranks.run_function(2, save_fsdp_with_optimizer, folder)
    ranks.run_function(2, load_fsdp_with_optimizer, folder)
    ranks.run_function(3, load_fsdp_with_optimizer, folder)
    _load_and_compare(_model(), folder)  # one process, no process group


def test_filesystem_writer_and_reader_name_the_folder(tmp_path):
    import trainrun.distributed.checkpoint as dcp
    model = _model()
    _set_expected(model)
    dcp.save({"model": model.state_dict(), "step": 7}, storage_writer=dcp.FileSystemWriter(str(tmp_path / "fs")))
    state = {"model": {k: v.clone().zero_() for k, v in model.state_dict().items()}, "step": 0}
    dcp.load(state, storage_reader=dcp.FileSystemReader(tmp_path / "fs"))
    assert state["step"] == 7
    _check_expected(state["model"], lambda p: p)
    with pytest.raises(ValueError, match="name different folders"):
        dcp.load(state, checkpoint_id=str(tmp_path / "other"), storage_reader=dcp.FileSystemReader(tmp_path / "fs"))
    with pytest.raises(RuntimeError, match="overwrite=False"):
        dcp.FileSystemWriter(tmp_path / "fs", overwrite=False)
    with pytest.raises(NotImplementedError, match="planner is not supported"):
        dcp.save({"step": 1}, checkpoint_id=str(tmp_path / "p"), planner=object())


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
