"""PyTorch 2.0's DCP names still in scripts: save_state_dict / load_state_dict with a storage writer / reader
(FutureWarning, then the same checkpoint as save / load), the StorageWriter / StorageReader base classes the
filesystem ones derive from, CheckpointException, and the metadata classes at the package's top."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.distributed.checkpoint as dcp  # noqa: E402


def test_save_state_dict_and_load_state_dict_round_trip(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    with pytest.warns(FutureWarning, match="'save_state_dict' is deprecated"):
        dcp.save_state_dict({"model": model.state_dict()}, storage_writer=dcp.FileSystemWriter(tmp_path / "c"),
                            no_dist=True)
    fresh = torch.nn.Linear(3, 2)
    state = {"model": fresh.state_dict()}
    with pytest.warns(FutureWarning, match="'load_state_dict' is deprecated"):
        dcp.load_state_dict(state, dcp.FileSystemReader(tmp_path / "c"), no_dist=True)
    fresh.load_state_dict(state["model"])
    assert torch.equal(fresh.weight, model.weight) and torch.equal(fresh.bias, model.bias)
    from trainrun.distributed.checkpoint.state_dict_loader import load_state_dict
    assert load_state_dict is dcp.load_state_dict


def test_storage_base_classes_and_exception():
    assert isinstance(dcp.FileSystemWriter("x"), dcp.StorageWriter)
    assert isinstance(dcp.FileSystemReader("x"), dcp.StorageReader)
    error = dcp.CheckpointException("save failed", {0: RuntimeError("disk")})
    assert list(error.failures) == [0]
    assert dcp.TensorStorageMetadata is dcp.metadata.TensorStorageMetadata
