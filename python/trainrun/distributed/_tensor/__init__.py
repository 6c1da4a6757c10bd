"""torch.distributed._tensor: DTensor at the path PyTorch 2.0-2.3 scripts import it from (since 2.4 it is
torch.distributed.tensor)."""
from trainrun.distributed.tensor import *  # noqa: F401,F403
from trainrun.distributed.tensor import (DeviceMesh, DTensor, Partial, Placement, Replicate, Shard,  # noqa: F401
                                         distribute_module, distribute_tensor, init_device_mesh)
from trainrun.distributed._tensor import device_mesh, placement_types  # noqa: F401,E402
