"""trainrun.nn.grad, as torch.nn.grad: the gradients of a convolution with respect to its input and its weight,
given the output's gradient (conv1d/2d/3d_input and _weight). Each runs the convolution's own backward: the
forward on a tensor of the given size, then autograd with grad_output, so the results are exactly the ones a
training step would produce."""
import trainrun
from trainrun.nn import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]


def _input_grad(conv, input_size, weight, grad_output, stride, padding, dilation, groups):
    with trainrun.enable_grad():
        x = trainrun.zeros(list(input_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
        out = conv(x, weight.detach(), None, stride, padding, dilation, groups)
        if tuple(out.shape) != tuple(grad_output.shape):
            raise ValueError(f"grad_output has shape {list(grad_output.shape)}; a convolution of input size "
                             f"{list(input_size)} gives {list(out.shape)}")
        grad, = trainrun.autograd.grad(out, [x], grad_output)
    return grad


def _weight_grad(conv, input, weight_size, grad_output, stride, padding, dilation, groups):  # noqa: A002
    with trainrun.enable_grad():
        w = trainrun.zeros(list(weight_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
        out = conv(input.detach(), w, None, stride, padding, dilation, groups)
        if tuple(out.shape) != tuple(grad_output.shape):
            raise ValueError(f"grad_output has shape {list(grad_output.shape)}; a convolution with weight size "
                             f"{list(weight_size)} gives {list(out.shape)}")
        grad, = trainrun.autograd.grad(out, [w], grad_output)
    return grad


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _input_grad(F.conv1d, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    return _weight_grad(F.conv1d, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _input_grad(F.conv2d, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    return _weight_grad(F.conv2d, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _input_grad(F.conv3d, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    return _weight_grad(F.conv3d, input, weight_size, grad_output, stride, padding, dilation, groups)
