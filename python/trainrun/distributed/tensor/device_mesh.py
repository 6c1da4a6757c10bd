"""torch.distributed.tensor.device_mesh (PyTorch 2.4+ keeps DeviceMesh importable from here too)."""
from trainrun.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
