"""trainrun.utils.benchmark, as torch.utils.benchmark: Timer (utils/timer.py), Measurement (utils/common.py) and
Compare (utils/compare.py)."""
from trainrun.utils.benchmark.utils.common import Measurement, TaskSpec, select_unit  # noqa: F401
from trainrun.utils.benchmark.utils.compare import Colorize, Compare  # noqa: F401
from trainrun.utils.benchmark.utils.timer import Language, Timer, timer  # noqa: F401

__all__ = ["Colorize", "Compare", "Language", "Measurement", "TaskSpec", "Timer", "select_unit", "timer"]
