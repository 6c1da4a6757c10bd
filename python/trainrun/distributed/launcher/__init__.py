"""trainrun.distributed.launcher, as torch.distributed.launcher: launch workers from Python (api.py)."""
from trainrun.distributed.launcher.api import LaunchConfig, elastic_launch, launch_agent  # noqa: F401
