"""trainrun.distributed.pipelining: pipeline parallelism with PyTorch 2.x's
names: PipelineStage, ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B,
ScheduleLoopedBFS (several stages per rank), ScheduleInterleavedZeroBubble and
ScheduleZBVZeroBubble (backward split into input and weight passes:
zero_bubble.py), get_schedule_class, TensorChunkSpec (see stage.py,
schedules.py, microbatch.py), pipeline() and SplitPoint (split.py: a model
cut into stages at its submodules); simulator.py runs schedules on paper
(timeline.py: the bubble ratio and the picture), and deadlocks."""
from trainrun.distributed.pipelining.microbatch import TensorChunkSpec  # noqa: F401
from trainrun.distributed.pipelining.schedules import (PipelineScheduleMulti, PipelineScheduleSingle,  # noqa
                                                       Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B,
                                                       ScheduleLoopedBFS, get_schedule_class)
from trainrun.distributed.pipelining.stage import PipelineStage  # noqa: F401
from trainrun.distributed.pipelining.zero_bubble import ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble  # noqa
from trainrun.distributed.pipelining.split import Pipe, SplitPoint, build_stage, pipe_split, pipeline  # noqa: F401


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (its submodules as attributes, imported when first read)
