"""The distributed checkpoint (trainrun.distributed.checkpoint): saved from
FSDP on 4 ranks and loaded into FSDP on 2, tensor parallelism on 2 and one
process (resharding), bitwise; replicated tensors written once; a save that
dies, at any of its steps, leaves a whole checkpoint at its path; corrupted,
truncated, uncommitted or foreign-version folders are refused by name with
nothing loaded. (Other formats: test_checkpoint_formats.py.)"""
import os
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))

from checkpoint_state import _expected, _fsdp_model, _fsdp_tp_model, _model, _set_expected  # noqa: E402


def _check_expected(tensors, full):
    for name, p in tensors.items():
        got = full(p).detach().numpy()
        np.testing.assert_array_equal(got, _expected(name, got.shape), err_msg=name)


_LAYOUTS = {"fsdp": _fsdp_model, "fsdp_tp": _fsdp_tp_model}  # FSDP over all ranks; FSDP x TP on (2, 2)


def save_sharded(folder, layout):
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    model = _LAYOUTS[layout](expected_values=True)
    dcp.save({"model": model.state_dict(), "step": 42, "note": {"lr": 0.5}}, checkpoint_id=folder)
    dist.destroy_process_group()


def load_sharded(folder, layout):
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    model = _LAYOUTS[layout](expected_values=False)
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
    ranks.run_function(4, save_sharded, folder, "fsdp")
    assert sorted(os.listdir(folder))[:2] == [".committed", ".metadata"]
    ranks.run_function(2, load_sharded, folder, "fsdp")
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


def test_fsdp_x_tp_saves_load_into_fsdp_and_one_process_and_back(ranks, tmp_path):
    """2-D parallelism: FSDP's rows are a block of each TP piece (a strided shard); the chunks saved carry
    their global offsets, so any layout loads them."""
    folder = str(tmp_path / "fsdp_tp")
    ranks.run_function(4, save_sharded, folder, "fsdp_tp")
    ranks.run_function(2, load_sharded, folder, "fsdp")
    import trainrun.distributed.checkpoint as dcp
    model = _model()
    state = {"model": model.state_dict(), "step": 0, "note": {}}
    dcp.load(state, checkpoint_id=folder)
    model.load_state_dict(state["model"])
    _check_expected(dict(model.named_parameters()), lambda p: p)
    from_fsdp = str(tmp_path / "fsdp")
    ranks.run_function(4, save_sharded, from_fsdp, "fsdp")
    ranks.run_function(4, load_sharded, from_fsdp, "fsdp_tp")


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


def test_a_data_file_written_in_place_between_check_and_read_loads_nothing(tmp_path, monkeypatch):
    """Loads check every piece, then read the bytes again into the tensors: a file overwritten in between (not
    by trainrun, whose saves rename a new folder in) must be refused before anything is read into the model."""
    import trainrun as tr
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint import _data_files
    model = _model()
    _set_expected(model)
    dcp.save({"model": model.state_dict()}, checkpoint_id=str(tmp_path / "ckpt"))
    data = next((tmp_path / "ckpt").glob("__*"))
    verify = _data_files.PieceReader.verify

    def verify_then_overwrite(self, chunks):
        verify(self, chunks)
        with open(data, "r+b") as f:  # the same inode, new bytes and time
            f.seek(-4, os.SEEK_END)
            f.write(b"\0\0\0\0")
        os.utime(data, ns=(0, 0))

    monkeypatch.setattr(_data_files.PieceReader, "verify", verify_then_overwrite)
    state = {"model": {k: tr.zeros(list(v.shape)) for k, v in model.state_dict().items()}}
    with pytest.raises(ValueError, match=f"data file {data.name} changed while it was loaded"):
        dcp.load(state, checkpoint_id=str(tmp_path / "ckpt"))
    assert all(not v.any().item() for v in state["model"].values()), "something was loaded"


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
    with pytest.raises(NotImplementedError, match="planner object is not supported"):
        dcp.save({"step": 1}, checkpoint_id=str(tmp_path / "p"), planner=object())


def test_the_metadata_as_pytorch_describes_it_and_the_saver_loader_modules(tmp_path):
    import trainrun as tr
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint import metadata as md
    from trainrun.distributed.checkpoint.state_dict_loader import load as load_alias
    from trainrun.distributed.checkpoint.state_dict_saver import save as save_alias
    state = {"model": {"w": tr.arange(6.0).reshape(2, 3)}, "step": 7}
    returned = save_alias(state, checkpoint_id=tmp_path / "ckpt", no_dist=True)
    meta = dcp.FileSystemReader(tmp_path / "ckpt").read_metadata()
    assert isinstance(meta, md.Metadata) and isinstance(returned, md.Metadata)
    w = meta.state_dict_metadata["model.w"]
    assert isinstance(w, md.TensorStorageMetadata) and w.size == tr.Size([2, 3])
    assert w.properties.dtype == tr.float32 and w.chunks[0].sizes == tr.Size([2, 3])
    assert isinstance(meta.state_dict_metadata["step"], md.BytesStorageMetadata)
    assert meta.planner_data["model.w"] == ("model", "w")
    target = {"model": {"w": tr.zeros(2, 3)}, "step": 0}
    load_alias(target, checkpoint_id=tmp_path / "ckpt", no_dist=True)
    assert tr.equal(target["model"]["w"], state["model"]["w"]) and target["step"] == 7
