"""trainrun.optim: SGD, Adam, AdamW (fused one-pass update) and LR schedulers, as PyTorch's."""
from trainrun import _C


def _params(params):
    return [p for p in params]


class SGD(_C.optim.SGD):
    def __init__(self, params, lr=1e-3, momentum=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(_params(params), lr, momentum, weight_decay, nesterov)


class Adam(_C.optim.Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
        super().__init__(_params(params), lr, tuple(betas), eps, weight_decay, amsgrad)


class AdamW(_C.optim.AdamW):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(_params(params), lr, tuple(betas), eps, weight_decay, amsgrad)


from trainrun.optim import lr_scheduler  # noqa: E402,F401
