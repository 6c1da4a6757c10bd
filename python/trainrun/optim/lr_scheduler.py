"""trainrun.optim.lr_scheduler: StepLR, CosineAnnealingLR, LinearLR (warm-up),
LambdaLR and SequentialLR, as PyTorch's."""
from trainrun import _C

LRScheduler = _C.optim.LRScheduler
StepLR, CosineAnnealingLR, LinearLR = _C.optim.StepLR, _C.optim.CosineAnnealingLR, _C.optim.LinearLR
LambdaLR, SequentialLR = _C.optim.LambdaLR, _C.optim.SequentialLR
