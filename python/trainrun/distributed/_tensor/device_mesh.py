"""torch.distributed._tensor.device_mesh (the pre-2.4 path of DeviceMesh)."""
from trainrun.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
