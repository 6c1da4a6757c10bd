"""torch.distributed._tensor.placement_types (the pre-2.4 path of the placements)."""
from trainrun.distributed.tensor.placement_types import *  # noqa: F401,F403
from trainrun.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard  # noqa: F401
