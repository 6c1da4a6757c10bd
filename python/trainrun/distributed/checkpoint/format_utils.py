"""torch.distributed.checkpoint.format_utils: a distributed checkpoint to one
torch.save file and back, in one process.

    from trainrun.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp
    dcp_to_torch_save("ckpt/step_100", "model.pt")      # every tensor whole, the state dict's own nesting
    torch_save_to_dcp("model.pt", "ckpt/from_torch")    # a checkpoint any sharding can load

The torch.save side is trainrun.save's zip format, which PyTorch's torch.load
reads, and trainrun.load's restricted unpickler (tensors and plain
containers, nothing that runs code) reads PyTorch's files. dcp_to_torch_save
(and dcp.load) also read a folder PyTorch's own DCP wrote: its pickled
metadata through an unpickler that knows only DCP's metadata classes."""
import json

from trainrun import _C
from trainrun.distributed.checkpoint import _metadata, _pytorch_dcp
from trainrun.distributed.checkpoint._state_dict_tree import unflatten
from trainrun.distributed.checkpoint.default_planner import DefaultLoadPlanner
from trainrun.distributed.checkpoint.storage import StorageReader


def _dtype(name):
    import trainrun
    dtype = getattr(trainrun, name, None)
    if dtype is None:
        raise ValueError(f"dcp_to_torch_save: the checkpoint holds a tensor of dtype {name!r}, unknown here")
    return dtype


def load_whole(dcp_checkpoint_dir):
    """The checkpoint's state dict in this process: every tensor whole, values as saved (a value saved per rank:
    the list of every rank's), nested as the saved state dict was (from each item's recorded path; a
    checkpoint without paths gives {name: value})."""
    from trainrun.distributed.checkpoint._load import load
    folder = _metadata.committed_folder(str(dcp_checkpoint_dir))
    if _pytorch_dcp.is_pytorch_dcp(folder):  # written by PyTorch: its metadata keeps each item's path too
        full, paths = _pytorch_dcp.read_all(folder)
        if not paths:
            return full
        return unflatten([(tuple(paths.get(name, (name,))), value) for name, value in full.items()])
    metadata = _metadata.read(folder)
    template, per_rank = {}, {}
    for name, item in metadata.items.items():
        kind = item.WhichOneof("kind")
        if kind == "tensor":
            template[name] = _C.empty(list(item.tensor.global_shape), dtype=_dtype(item.tensor.dtype))
        elif kind == "per_rank":  # every rank's value, as a list by rank
            per_rank[name] = [json.loads(text) for text in item.per_rank.json]
        else:
            template[name] = None
    load(template, checkpoint_id=folder, no_dist=True)
    template.update(per_rank)
    paths = {name: item.path_json for name, item in metadata.items.items()}
    if not all(paths.values()):
        return template
    return unflatten([(tuple(json.loads(paths[name])), value) for name, value in template.items()])


class BroadcastingTorchSaveReader(StorageReader):
    """dcp.load's reader of one torch.save file, as PyTorch's: the coordinator rank reads it and broadcasts each
    tensor; every rank keeps its piece of the state dict it loads into (a sharded model loads a whole file):

        dcp.load(model_state, checkpoint_id="model.pt", storage_reader=BroadcastingTorchSaveReader(),
                 planner=DynamicMetaLoadPlanner())
    """

    def __init__(self, checkpoint_id=None, coordinator_rank=0):
        self.checkpoint_id = checkpoint_id
        self.coordinator_rank = coordinator_rank


class DynamicMetaLoadPlanner(DefaultLoadPlanner):
    """The load planner for BroadcastingTorchSaveReader, as PyTorch's: the plan comes from the state dict being
    loaded (a torch.save file has no checkpoint metadata)."""


def dcp_to_torch_save(dcp_checkpoint_dir, torch_save_path):
    """Writes the distributed checkpoint at dcp_checkpoint_dir (any sharding it was saved with) as one
    torch.save file of full tensors."""
    import trainrun
    trainrun.save(load_whole(dcp_checkpoint_dir), str(torch_save_path))


def torch_save_to_dcp(torch_save_path, dcp_checkpoint_dir):
    """Writes the state dict of a torch.save file (PyTorch's or trainrun's) as a distributed checkpoint."""
    import trainrun
    from trainrun.distributed.checkpoint._save import save
    state = trainrun.load(str(torch_save_path), weights_only=True)
    if not isinstance(state, dict):
        raise TypeError(f"torch_save_to_dcp: {torch_save_path} holds a {type(state).__name__}, not a state dict")
    save(state, checkpoint_id=str(dcp_checkpoint_dir), no_dist=True)


def main(argv=None):
    """`python -m torch.distributed.checkpoint.format_utils {torch_to_dcp,dcp_to_torch} SRC DST`, PyTorch's
    command line (a source that is not there is reported and skipped, as PyTorch's does)."""
    import argparse
    import os
    parser = argparse.ArgumentParser(description="Converts between torch.save files and distributed checkpoints.")
    parser.add_argument("mode", choices=["torch_to_dcp", "dcp_to_torch"], help="Conversion mode")
    parser.add_argument("src", help="Path to the source model")
    parser.add_argument("dst", help="Path to the destination model")
    args = parser.parse_args(argv)
    print(f"Converting checkpoint from {args.src} to {args.dst} using method: '{args.mode}'")
    to_dcp = args.mode == "torch_to_dcp"
    if not (os.path.isfile(args.src) if to_dcp else os.path.isdir(args.src)):
        print(f"No checkpoint found at {args.src}. Skipping conversion.")
        return
    (torch_save_to_dcp if to_dcp else dcp_to_torch_save)(args.src, args.dst)


if __name__ == "__main__":
    main()
