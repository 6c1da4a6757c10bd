"""The small model and position-dependent values the checkpoint suites save and load
(test_checkpoint_dcp.py, test_checkpoint_formats.py), in a module of its own so that both suites and their
rank functions share them."""
import zlib

import numpy as np


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


def _fsdp_tp_model(expected_values):
    """FSDP x TP on a (dp=2, tp=2) mesh, as torchtitan does: the tensor-parallel plan on "tp", then
    fully_shard over "dp" on each Linear and the root."""
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.fsdp import fully_shard
    from trainrun.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = _model()
    if expected_values:
        _set_expected(model)
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    for module in (model[0], model[2], model):
        fully_shard(module, mesh=mesh["dp"])
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
