"""Losses of torch.nn.functional beyond the C++ ones (cross_entropy,
nll_loss, mse_loss, l1_loss): smooth L1, Huber, binary cross-entropy (on
probabilities and on logits), KL divergence and a few margin losses, with
PyTorch's signatures, composed of core ops."""
import warnings

import numpy as np

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


def _weighted(losses, weight, reduction, where, mean_over_weights):
    """PyTorch 2.6's weight= of mse_loss, l1_loss and huber_loss: each element's loss times its weight (the
    input's shape); 'mean' divides by the weights' sum (mse, l1) or by the count (huber), as PyTorch's does."""
    if tuple(weight.shape) != tuple(losses.shape):
        raise ValueError(f"{where}: Weights and input must have the same size (weight {list(weight.shape)}, "
                         f"input {list(losses.shape)})")
    weighted = losses * weight
    if reduction == "none":
        return weighted
    if reduction == "sum":
        return weighted.sum()
    if reduction == "mean":
        return weighted.sum() / weight.sum() if mean_over_weights else weighted.mean()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


@loss
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    reduction = legacy_reduction("mse_loss", size_average, reduce, reduction)
    if weight is not None:
        return _weighted(_C.nn.mse_loss(input, target, reduction="none"), weight, reduction, "mse_loss", True)
    return _C.nn.mse_loss(input, target, reduction=reduction)


@loss
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    reduction = legacy_reduction("l1_loss", size_average, reduce, reduction)
    if weight is not None:
        return _weighted(_C.nn.l1_loss(input, target, reduction="none"), weight, reduction, "l1_loss", True)
    return _C.nn.l1_loss(input, target, reduction=reduction)


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
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    d = (input - target).abs()
    losses = _C.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    if weight is not None:
        return _weighted(losses, weight, reduction, "huber_loss", False)
    return _reduce(losses, reduction, "huber_loss")


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
    loss = _C.exp(input) - target * input if log_input else input - target * _C.log(input + eps)
    if full:  # Stirling's approximation of log(target!), for targets above 1 (PyTorch's)
        import math
        stirling = target * _C.log(target) - target + 0.5 * _C.log(target * (2 * math.pi))
        loss = loss + stirling.masked_fill(target <= 1, 0.0)
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


def _lengths(values, where, what):
    if hasattr(values, "tolist"):
        values = values.tolist()
    values = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    if any(v < 0 for v in values):
        raise ValueError(f"{where}(): {what} must be non-negative, got {values}")
    return values


def _log_add(*terms):
    """log(sum(exp(terms))) elementwise, -inf where every term is -inf, with zero (not NaN) gradients there."""
    stacked = _C.stack(list(terms), 0)
    peak = stacked.amax(0)
    hopeless = peak == float("-inf")
    peak = _C.where(hopeless, _C.zeros([], dtype=peak.dtype, device=peak.device), peak)
    total = (stacked - peak.detach()).exp().sum(0)
    total = _C.where(hopeless, _C.ones([], dtype=total.dtype, device=total.device), total)
    result = peak.detach() + total.log()
    return _C.where(hopeless, _C.full([], float("-inf"), dtype=result.dtype, device=result.device), result)


def _softmax_gradient_term(lp, in_lens):
    """Per sample, zero whose gradient is exp(log_probs) over its first input_length steps. PyTorch's ctc_loss
    backward returns the true gradient plus this term: the gradient with respect to the logits of a log_softmax
    that made log_probs (whose backward removes exactly this term), not with respect to log_probs. Adding it
    makes log_probs' gradients equal PyTorch's, and the logits' gradients stay right."""
    steps = lp.shape[0]
    live = np.arange(steps)[:, None] < np.asarray(in_lens)[None, :]  # (T, N)
    mask = _C.from_numpy(live.astype(np.float32)).to(device=lp.device, dtype=lp.dtype)
    weighted = (lp.detach().exp() * mask.unsqueeze(-1) * lp).sum(dim=(0, 2))
    return weighted - weighted.detach()


@op(function=True, functional=True)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",  # noqa: C901
             zero_infinity=False):
    """Connectionist temporal classification: -log of the probability, summed over every alignment of the
    target (blanks between and around its labels, repeats merged), of log_probs (T, N, C) (or (T, C)). The
    forward (alpha) recursion in log space, one step per time step, differentiable as a composite. reduction
    'mean' divides each sample's loss by its target length, then averages."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"ctc_loss(): {reduction} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise ValueError(f"ctc_loss(): log_probs must be (T, N, C) or (T, C), got {list(log_probs.shape)}")
    steps, batch, classes = lp.shape
    in_lens = _lengths(input_lengths, "ctc_loss", "input_lengths")
    tgt_lens = _lengths(target_lengths, "ctc_loss", "target_lengths")
    if len(in_lens) != batch or len(tgt_lens) != batch:
        raise ValueError(f"ctc_loss(): expected {batch} input and target lengths, got {len(in_lens)} and "
                         f"{len(tgt_lens)}")
    if any(n > steps for n in in_lens):
        raise ValueError(f"ctc_loss(): input_lengths {in_lens} must be at most the number of time steps {steps}")
    flat = targets.reshape([-1]).long().tolist() if targets.ndim == 1 or unbatched else None
    rows, offset = [], 0
    for n, length in enumerate(tgt_lens):  # each sample's labels, from padded (N, S) or concatenated targets
        if flat is not None:
            rows.append(flat[offset:offset + length])
            offset += length
        else:
            rows.append(targets[n, :length].long().tolist())
    width = 2 * max(tgt_lens + [0]) + 1
    extended = [[blank] * width for _ in range(batch)]
    for n, labels in enumerate(rows):
        if any(not 0 <= c < classes or c == blank for c in labels):
            raise ValueError(f"ctc_loss(): target labels must be in [0, {classes}) and not the blank {blank}, "
                             f"got {labels}")
        extended[n][1:2 * len(labels):2] = labels
    ext = _C.from_numpy(np.asarray(extended, dtype=np.int64)).to(lp.device)
    emit = lp.gather(2, ext.unsqueeze(0).expand([steps, batch, width]))  # (T, N, 2S+1)
    skip_ok = [[s >= 2 and extended[n][s] != blank and extended[n][s] != extended[n][s - 2] for s in range(width)]
               for n in range(batch)]
    skip_ok = _C.from_numpy(np.asarray(skip_ok, dtype=bool)).to(lp.device)
    minus_inf = _C.full([batch, 1], float("-inf"), dtype=lp.dtype, device=lp.device)
    start = _C.cat([emit[0, :, :2], minus_inf.expand([batch, width - 2])], 1) if width > 2 else emit[0, :, :width]
    alphas = [start]
    for t in range(1, max(in_lens + [1])):
        prev = alphas[-1]
        shifted1 = _C.cat([minus_inf, prev[:, :-1]], 1)
        shifted2 = _C.cat([minus_inf, minus_inf, prev[:, :-2]], 1) if width > 2 else minus_inf.expand([batch, width])
        shifted2 = _C.where(skip_ok, shifted2, minus_inf.expand([batch, width]))
        alphas.append(_log_add(prev, shifted1, shifted2) + emit[t])
    losses = []
    for n in range(batch):
        if in_lens[n] == 0:  # no time steps: certain for an empty target, impossible otherwise
            value = float("inf") if tgt_lens[n] > 0 else 0.0
            losses.append(_C.full([], value, dtype=lp.dtype, device=lp.device))
            continue
        final = alphas[in_lens[n] - 1][n]
        ends = [final[2 * tgt_lens[n]]] + ([final[2 * tgt_lens[n] - 1]] if tgt_lens[n] > 0 else [])
        losses.append(-_log_add(*ends) if len(ends) > 1 else -ends[0])
    loss = _C.stack(losses, 0)
    if lp.requires_grad:
        loss = loss + _softmax_gradient_term(lp, in_lens)
    if zero_infinity:
        loss = _C.where(loss == float("inf"), _C.zeros([], dtype=loss.dtype, device=loss.device), loss)
    if reduction == "mean":
        divisors = _C.from_numpy(np.maximum(np.asarray(tgt_lens, dtype=np.float32), 1.0)).to(lp.device)
        return (loss / divisors.to(loss.dtype)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.reshape([]) if unbatched else loss


@op(function=False, functional=True)
def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) for any distance function d (pairwise_distance by default)."""
    from trainrun.nn._functional_distance import pairwise_distance
    distance = distance_function or pairwise_distance
    positive_distance, negative_distance = distance(anchor, positive), distance(anchor, negative)
    if swap:
        negative_distance = _C.minimum(negative_distance, distance(positive, negative))
    return _reduce(_C.relu(margin + positive_distance - negative_distance), reduction,
                   "triplet_margin_with_distance_loss")


@loss
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """Per sample, over its target classes j (target's leading entries, up to the first -1) and the classes i
    that are not targets: max(0, 1 - (x[j] - x[i])), summed and divided by the number of classes."""
    reduction = legacy_reduction("multilabel_margin_loss", size_average, reduce, reduction)
    one_sample = input.ndim <= 1
    x = input.reshape([1, -1]) if one_sample else input
    y = (target.reshape([1, -1]) if one_sample else target).long()
    if list(y.shape) != list(x.shape):
        raise ValueError(f"multilabel_margin_loss(): target {list(target.shape)} must have the input's shape "
                         f"{list(input.shape)}")
    classes = x.shape[1]
    valid = (y >= 0).long().cumprod(1) > 0  # the entries before the first -1
    labels = _C.where(valid, y, y * 0)
    is_target = (_C.one_hot(labels, classes) * valid.long().unsqueeze(2)).sum(1) > 0
    picked = x.gather(1, labels)  # x[y_j] per position j
    hinge = _C.relu(1.0 - picked.unsqueeze(2) + x.unsqueeze(1))  # [n, j, i]
    keep = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = (hinge * keep.to(x.dtype)).sum(dim=(1, 2)) / classes
    return _reduce(loss.reshape([]) if one_sample else loss, reduction, "multilabel_margin_loss")


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
