"""torch.nn.utils.fusion: a convolution or linear layer and the BatchNorm after it (in eval mode) folded into one
layer whose weight and bias give the same outputs."""
import copy

import trainrun
from trainrun.nn.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) Parameters of the conv that computes bn(conv(x)) with the BatchNorm's running statistics."""
    dtype = conv_w.dtype
    conv_b = conv_b if conv_b is not None else trainrun.zeros_like(bn_rm)
    bn_w = bn_w if bn_w is not None else trainrun.ones_like(bn_rm)
    bn_b = bn_b if bn_b is not None else trainrun.zeros_like(bn_rm)
    scale = bn_w * trainrun.rsqrt(bn_rv + bn_eps)
    shape = [1] * conv_w.dim()
    shape[1 if transpose else 0] = -1
    weight = (conv_w * scale.reshape(shape)).to(dtype)
    bias = ((conv_b - bn_rm) * scale + bn_b).to(dtype)
    return Parameter(weight.detach(), conv_w.requires_grad), Parameter(bias.detach(), conv_w.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of conv (eval mode, as bn) with bn folded in."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("fuse_conv_bn_eval: the BatchNorm has no running statistics (track_running_stats)")
    return _with(fused, *fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps,
                                              bn.weight, bn.bias, transpose))


def _with(layer, weight, bias):
    """layer with these weight and bias Parameters (a bias registered if it had none)."""
    layer.weight = weight
    if layer.bias is None:
        layer.register_parameter("bias", bias)
    else:
        layer.bias = bias
    return layer


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of the linear layer that computes bn(linear(x)) in eval mode."""
    linear_b = linear_b if linear_b is not None else trainrun.zeros_like(bn_rm)
    scale = bn_w * trainrun.rsqrt(bn_rv + bn_eps)
    weight = linear_w * scale.unsqueeze(-1)
    bias = (linear_b - bn_rm) * scale + bn_b
    return Parameter(weight.detach(), linear_w.requires_grad), Parameter(bias.detach(), linear_w.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of linear (eval mode, as bn) with bn folded in."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if linear.out_features != bn.num_features:
        raise AssertionError("To fuse, linear.out_features must equal bn.num_features")
    fused = copy.deepcopy(linear)
    return _with(fused, *fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps,
                                                bn.weight, bn.bias))
