"""How tests/python/data/pytorch26_dcp*/ were made, with PyTorch 2.6's own DCP (the peer chroot of
../shared/peer-modern; never run by CI):

    ../shared/peer-modern/enter.sh python3 /peer/tests/python/data/make_pytorch26_dcp.py one
    ../shared/peer-modern/enter.sh torchrun --nproc-per-node 2 /peer/tests/python/data/make_pytorch26_dcp.py sharded
"""
import sys

import torch
import torch.distributed.checkpoint as dcp

HERE = "/peer/tests/python/data"

if sys.argv[1] == "one":
    state = {"model": {"0.weight": torch.arange(12, dtype=torch.float32).reshape(3, 4),
                       "0.bias": torch.tensor([1.5, -2.0, 3.25], dtype=torch.float64)},
             "step": 7, "extra": {"name": "run-a", "ids": torch.arange(5)}}
    dcp.save(state, checkpoint_id=f"{HERE}/pytorch26_dcp")
else:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (2,))
    w = torch.arange(7 * 3, dtype=torch.float32).reshape(7, 3)
    state = {"model": {"w": distribute_tensor(w, mesh, [Shard(0)]),
                       "b": distribute_tensor(torch.tensor([0.5, 1.5]), mesh, [Replicate()])},
             "step": 11, "meta": {"tag": "sharded", "lrs": [0.1, 0.01]}}
    dcp.save(state, checkpoint_id=f"{HERE}/pytorch26_dcp_sharded")
    dist.destroy_process_group()
