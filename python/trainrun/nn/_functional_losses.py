"""Losses of torch.nn.functional beyond the C++ ones (cross_entropy,
nll_loss, mse_loss, l1_loss): smooth L1, Huber, binary cross-entropy (on
probabilities and on logits), KL divergence and a few margin losses, with
PyTorch's signatures, composed of core ops."""
import warnings

from trainrun import _C
from trainrun._op_table import op


# Every loss: a trainrun.nn.functional function, in float32 under autocast (PyTorch's float32 list).
loss = op(function=False, functional=True, float32_under_autocast=True)


def _reduce(loss, reduction, where):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{where}(): reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def legacy_reduction(where, size_average, reduce, reduction):
    """PyTorch's mapping of the deprecated size_average/reduce pair onto reduction= (with its warning)."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn(f"{where}: size_average and reduce args will be deprecated, please use reduction= instead",
                  UserWarning, stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


@loss
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
                  reduction="mean", label_smoothing=0.0):
    reduction = legacy_reduction("cross_entropy", size_average, reduce, reduction)
    if target.is_floating_point():
        return _cross_entropy_with_probabilities(input, target, weight, reduction, label_smoothing)
    return _C.nn.cross_entropy(input, target, weight, ignore_index=ignore_index, reduction=reduction,
                               label_smoothing=label_smoothing)


def _cross_entropy_with_probabilities(input, target, weight, reduction, label_smoothing):  # noqa: A002
    """PyTorch's cross_entropy with class probabilities as the target (input's shape, floating): per position,
    -sum over classes of weight * target * log_softmax(input); the mean is over positions (not weighted)."""
    if list(target.shape) != list(input.shape):
        raise RuntimeError(f"cross_entropy: a target of class probabilities must have the input's shape "
                           f"{list(input.shape)}, got {list(target.shape)}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    class_dim = 1 if input.dim() >= 2 else 0
    classes = input.shape[class_dim]
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    terms = _C.log_softmax(input, class_dim, None) * target
    if weight is not None:
        terms = terms * weight.reshape([classes] + [1] * (input.dim() - class_dim - 1))
    loss = -terms.sum(class_dim)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


@loss
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
             reduction="mean"):
    reduction = legacy_reduction("nll_loss", size_average, reduce, reduction)
    return _C.nn.nll_loss(input, target, weight, ignore_index=ignore_index, reduction=reduction)


@loss
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    return _C.nn.mse_loss(input, target, reduction=legacy_reduction("mse_loss", size_average, reduce, reduction))


@loss
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    return _C.nn.l1_loss(input, target, reduction=legacy_reduction("l1_loss", size_average, reduce, reduction))


def _same_shape(input, target, where):  # noqa: A002
    if list(input.shape) != list(target.shape):
        raise ValueError(f"{where}(): target shape {list(target.shape)} differs from input shape "
                         f"{list(input.shape)}")


@loss
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):  # noqa: A002
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: the L1 loss)."""
    reduction = legacy_reduction("smooth_l1_loss", size_average, reduce, reduction)
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction, "smooth_l1_loss")
    return _reduce(_C.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction, "smooth_l1_loss")


@loss
def huber_loss(input, target, reduction="mean", delta=1.0):  # noqa: A002
    d = (input - target).abs()
    return _reduce(_C.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction, "huber_loss")


@loss
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """-(y log p + (1 - y) log(1 - p)), each log clamped at -100 as PyTorch's."""
    reduction = legacy_reduction("binary_cross_entropy", size_average, reduce, reduction)
    _same_shape(input, target, "binary_cross_entropy")
    log_p = _C.clamp(_C.log(input), -100.0, None)
    log_q = _C.clamp(_C.log(1.0 - input), -100.0, None)
    loss = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


@loss
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                                     reduction="mean", pos_weight=None):
    """Binary cross-entropy on logits, computed stably: (1 - y) x + (1 + (w_pos - 1) y) log(1 + exp(-x))."""
    reduction = legacy_reduction("binary_cross_entropy_with_logits", size_average, reduce, reduction)
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    log_one_plus_exp = _C.log1p(_C.exp(-input.abs())) + _C.relu(-input)  # log(1 + exp(-x)), stable
    if pos_weight is not None:
        loss = (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * log_one_plus_exp
    else:
        loss = (1.0 - target) * input + log_one_plus_exp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


@loss
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):  # noqa: A002
    """KL(target || exp(input)) pointwise: target (log target - input); input holds log-probabilities.
    reduction="batchmean" divides the sum by the batch size (the true KL divergence)."""
    reduction = legacy_reduction("kl_div", size_average, reduce, reduction)
    if log_target:
        loss = _C.exp(target) * (target - input)
    else:
        zero = target == 0
        safe = _C.where(zero, _C.ones([], dtype=target.dtype, device=target.device), target)
        loss = _C.where(zero, _C.zeros([], dtype=input.dtype, device=input.device), target * (_C.log(safe) - input))
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction, "kl_div")


@loss
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    reduction = legacy_reduction("soft_margin_loss", size_average, reduce, reduction)
    return _reduce(_C.log1p(_C.exp(-target * input)), reduction, "soft_margin_loss")


@loss
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    reduction = legacy_reduction("margin_ranking_loss", size_average, reduce, reduction)
    return _reduce(_C.relu(-target * (input1 - input2) + margin), reduction, "margin_ranking_loss")


@loss
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    reduction = legacy_reduction("hinge_embedding_loss", size_average, reduce, reduction)
    loss = _C.where(target == 1, input, _C.relu(margin - input))
    return _reduce(loss, reduction, "hinge_embedding_loss")


@loss
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    reduction = legacy_reduction("cosine_embedding_loss", size_average, reduce, reduction)
    eps = 1e-12
    cos = (input1 * input2).sum(dim=-1) / _C.sqrt(((input1 * input1).sum(dim=-1) + eps) *
                                                 ((input2 * input2).sum(dim=-1) + eps))
    loss = _C.where(target == 1, 1.0 - cos, _C.relu(cos - margin))
    return _reduce(loss, reduction, "cosine_embedding_loss")


@loss
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,  # noqa: A002
                     reduce=None, reduction="mean"):
    reduction = legacy_reduction("poisson_nll_loss", size_average, reduce, reduction)
    if full:
        raise NotImplementedError("poisson_nll_loss(full=True) is not supported")
    loss = _C.exp(input) - target * input if log_input else input - target * _C.log(input + eps)
    return _reduce(loss, reduction, "poisson_nll_loss")


@loss
def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):  # noqa: A002
    import math
    v = _C.clamp(var, eps, None)
    loss = (_C.log(v) + (input - target) * (input - target) / v) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, "gaussian_nll_loss")


@loss
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0), d the pairwise p-norm distance; swap: the closer of d(a, n), d(p, n)."""
    from trainrun.nn._functional_distance import pairwise_distance
    reduction = legacy_reduction("triplet_margin_loss", size_average, reduce, reduction)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"triplet_margin_loss(): the anchor, positive and negative must have the same number of "
                           f"dims, got {anchor.ndim}, {positive.ndim} and {negative.ndim}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _C.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(_C.relu(d_pos - d_neg + margin), reduction, "triplet_margin_loss")


@loss
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                                reduction="mean"):
    """Per sample, the mean over classes of the binary logistic losses of the (multi-hot) target."""
    from trainrun.nn._functional_activations import logsigmoid
    reduction = legacy_reduction("multilabel_soft_margin_loss", size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.sum(dim=-1) / input.shape[-1], reduction, "multilabel_soft_margin_loss")


@loss
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,  # noqa: A002
                      reduction="mean"):
    """Per sample, sum over the other classes j of max(0, margin - x[y] + x[j])^p (times weight[y]), over C."""
    reduction = legacy_reduction("multi_margin_loss", size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss(): only p == 1 and p == 2 supported, got {p}")
    one_sample = input.ndim == 1
    x = input.unsqueeze(0) if one_sample else input
    y = (target.reshape([1]) if one_sample else target).long()
    picked = x.gather(1, y.unsqueeze(1))
    margins = _C.relu(x - picked + margin)
    if p == 2:
        margins = margins * margins
    others = 1.0 - _C.one_hot(y, x.shape[1]).to(x.dtype)  # the target's own class does not count
    margins = margins * others
    if weight is not None:
        margins = margins * weight.index_select(0, y).unsqueeze(1)
    loss = margins.sum(dim=1) / x.shape[1]
    return _reduce(loss.reshape([]) if one_sample else loss, reduction, "multi_margin_loss")
