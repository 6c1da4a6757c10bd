"""reset_parameters() (and reset_running_stats()) for the layers that initialise in their constructors, as
PyTorch's: what a model built on the meta device calls after to_empty() (`for m in model.modules(): if
hasattr(m, "reset_parameters"): m.reset_parameters()`), so every parameter and running statistic gets its
default value again, drawn in PyTorch's order."""
import math

from trainrun._autograd import no_grad
from trainrun.nn import init


def _norm_affine(self):
    """Ones for the weight and zeros for the bias of an affine normalisation."""
    if getattr(self, "weight", None) is not None:
        init.ones_(self.weight)
    if getattr(self, "bias", None) is not None:
        init.zeros_(self.bias)


def _running_stats(self):
    """Running mean 0, running variance 1, no batches counted (when the layer tracks them)."""
    if not self.track_running_stats or getattr(self, "running_mean", None) is None:
        return
    with no_grad():
        self.running_mean.zero_()
        self.running_var.fill_(1.0)
        if getattr(self, "num_batches_tracked", None) is not None:
            self.num_batches_tracked.zero_()


def _batch_norm_reset(self):
    self.reset_running_stats()
    _norm_affine(self)


def _instance_norm_reset(self):
    _running_stats(self)
    _norm_affine(self)


def _prelu_reset(self):
    init.constant_(self.weight, self.init)


def _bilinear_reset(self):
    bound = 1.0 / math.sqrt(self.weight.size(1))
    init.uniform_(self.weight, -bound, bound)
    if self.bias is not None:
        init.uniform_(self.bias, -bound, bound)


def _transposed_reset(self):
    """kaiming_uniform_(a=sqrt(5)) on a (in, out // groups, *k) weight: its fan_in is weight.size(1) * prod(k)."""
    fan_in = self.weight.size(1) * math.prod(self.weight.shape[2:])
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    init.uniform_(self.weight, -bound, bound)
    if self.bias is not None:
        init.uniform_(self.bias, -bound, bound)


def install(nn):
    from trainrun.nn._cpp_layers import _BatchNormArguments
    from trainrun.nn._layers import _InstanceNorm
    _BatchNormArguments.reset_parameters = _batch_norm_reset
    _InstanceNorm.reset_running_stats = _running_stats
    _InstanceNorm.reset_parameters = _instance_norm_reset
    nn.GroupNorm.reset_parameters = _norm_affine
    nn.PReLU.reset_parameters = _prelu_reset
    nn.Bilinear.reset_parameters = _bilinear_reset
    for cls in (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d):
        cls.reset_parameters = _transposed_reset
