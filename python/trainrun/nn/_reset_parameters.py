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


def _conv_reset(self):
    """kaiming_uniform_(a=sqrt(5)), which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), on the weight and the bias; the
    fan_in is weight.size(1) * prod(kernel) for a convolution's (out, in // groups, *k) weight and a transposed
    one's (in, out // groups, *k) alike."""
    fan_in = self.weight.size(1) * math.prod(self.weight.shape[2:])
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    init.uniform_(self.weight, -bound, bound)
    if self.bias is not None:
        init.uniform_(self.bias, -bound, bound)


def _cell_reset(self):
    """Every weight and bias of a recurrent cell from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
    bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
    for p in self.parameters():
        init.uniform_(p, -bound, bound)


def _lazy_reset(self):
    """A lazy module resets once it has its real module (before its first input there is nothing to reset)."""
    real = self._lazy_module_or_none()
    if real is not None:
        real.reset_parameters()


def install(nn):
    from trainrun.nn._cpp_layers import _BatchNormArguments
    from trainrun.nn._layers import _InstanceNorm
    _BatchNormArguments.reset_parameters = _batch_norm_reset
    _InstanceNorm.reset_running_stats = _running_stats
    _InstanceNorm.reset_parameters = _instance_norm_reset
    nn.GroupNorm.reset_parameters = _norm_affine
    nn.PReLU.reset_parameters = _prelu_reset
    nn.Bilinear.reset_parameters = _bilinear_reset
    for cls in (nn.Conv1d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d):
        cls.reset_parameters = _conv_reset
    nn.RNNCellBase.reset_parameters = _cell_reset
    nn.SyncBatchNorm.reset_running_stats = _running_stats
    nn.SyncBatchNorm.reset_parameters = _instance_norm_reset  # (running statistics, then the affine parameters)
    from trainrun.nn._lazy import _Lazy
    _Lazy.reset_parameters = _lazy_reset
