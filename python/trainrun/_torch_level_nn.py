"""The nn functions PyTorch also binds at torch's top level (torch.dropout, torch.layer_norm, torch.conv1d, ...),
with the top-level signatures where they differ from torch.nn.functional's (torch.dropout's `train` is
positional, torch.embedding takes the weight first, torch.batch_norm orders its tensors as the aten op does; the
cudnn flags are accepted and change nothing)."""
import trainrun
from trainrun.nn import functional as F


def dropout(input, p, train):  # noqa: A002
    return F.dropout(input, p, train)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):  # noqa: A002
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):  # noqa: A002
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,  # noqa: A002
               cudnn_enabled=True):
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,  # noqa: A002
                  cudnn_enabled=True):
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return F.embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):  # noqa: A002
    return F.rrelu(input, lower, upper, training)


_SAME_AS_FUNCTIONAL = ("conv1d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "cosine_similarity",
                       "pairwise_distance", "bilinear", "pixel_shuffle", "pixel_unshuffle", "celu", "selu", "prelu",
                       "hardshrink", "alpha_dropout", "feature_alpha_dropout", "channel_shuffle", "pdist")


def install(namespace):
    for name in _SAME_AS_FUNCTIONAL:
        if name not in namespace and hasattr(F, name):
            namespace[name] = getattr(F, name)
    for fn in (dropout, layer_norm, group_norm, batch_norm, instance_norm, embedding, rrelu):
        namespace.setdefault(fn.__name__, fn)


install(vars(trainrun))
