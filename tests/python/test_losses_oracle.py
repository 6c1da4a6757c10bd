"""Every loss of nn.functional with its less common arguments (label smoothing, probability targets, class
weights, pos_weight, log targets, swap, p-norms, Stirling's term, zero_infinity, ...) equal to PyTorch 1.13's,
the loss and its gradient with respect to the input."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun  # noqa: E402

_rng = np.random.default_rng(0)
Y = _rng.standard_normal((4, 5)).astype(np.float32)
LABELS = np.array([1, 0, 4, 2])
BITS = (_rng.random((4, 5)) > 0.5).astype(np.float32)
CTC_LOGITS = _rng.standard_normal((6, 2, 4)).astype(np.float32)
CLASS_WEIGHT = np.arange(1, 6, dtype=np.float32)

def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


# name -> (input array, loss of (torch module, functional module, input tensor))
CASES = {
    "cross_entropy label_smoothing ignore_index weight": (Y * 2, lambda t, F, x: F.cross_entropy(
        x, t.tensor(np.array([1, -100, 4, 2])), weight=t.tensor(CLASS_WEIGHT), label_smoothing=0.1)),
    "cross_entropy probability targets": (Y * 2, lambda t, F, x: F.cross_entropy(
        x, t.softmax(t.tensor(Y), 1), label_smoothing=0.2)),
    "cross_entropy 3-d none": (Y.reshape(2, 5, 2), lambda t, F, x: F.cross_entropy(
        x, t.tensor(np.array([[1, 0], [4, 2]])), reduction="none")),
    "nll_loss sum": (Y, lambda t, F, x: F.nll_loss(t.log_softmax(x, 1), t.tensor(LABELS), reduction="sum")),
    "binary_cross_entropy weight": (1 / (1 + np.exp(-Y)), lambda t, F, x: F.binary_cross_entropy(
        x, t.tensor(BITS), weight=t.tensor(np.linspace(0.5, 1.5, 5).astype(np.float32)))),
    "bce_with_logits pos_weight": (Y, lambda t, F, x: F.binary_cross_entropy_with_logits(
        x, t.tensor(BITS), pos_weight=t.tensor(CLASS_WEIGHT))),
    "mse none": (Y, lambda t, F, x: F.mse_loss(x, t.tensor(Y[::-1].copy()), reduction="none")),
    "smooth_l1 beta": (Y, lambda t, F, x: F.smooth_l1_loss(x, t.tensor(Y[::-1].copy()), beta=0.5)),
    "huber delta": (Y, lambda t, F, x: F.huber_loss(x, t.tensor(Y[::-1].copy()), delta=0.7)),
    "kl_div batchmean log_target": (Y, lambda t, F, x: F.kl_div(
        t.log_softmax(x, 1), t.log_softmax(t.tensor(Y[::-1].copy()), 1), reduction="batchmean", log_target=True)),
    "margin_ranking": (Y[:, 0].copy(), lambda t, F, x: F.margin_ranking_loss(
        x, t.tensor(Y[:, 1].copy()), t.tensor(np.array([1., -1., 1., -1.], dtype=np.float32)), margin=0.3)),
    "hinge_embedding": (Y, lambda t, F, x: F.hinge_embedding_loss(x, t.tensor(np.sign(Y[::-1].copy())), margin=0.5)),
    "soft_margin": (Y, lambda t, F, x: F.soft_margin_loss(x, t.tensor(np.sign(Y[::-1].copy())))),
    "multilabel_soft_margin": (Y, lambda t, F, x: F.multilabel_soft_margin_loss(x, t.tensor(BITS))),
    "multi_margin p=2 weight": (Y, lambda t, F, x: F.multi_margin_loss(
        x, t.tensor(LABELS), p=2, margin=0.8, weight=t.tensor(CLASS_WEIGHT))),
    "multilabel_margin": (Y, lambda t, F, x: F.multilabel_margin_loss(x, t.tensor(np.array(
        [[3, 0, -1, 1, 0], [1, 2, 3, -1, 0], [0, -1, 0, 0, 0], [4, 3, 2, 1, 0]])))),
    "cosine_embedding": (Y, lambda t, F, x: F.cosine_embedding_loss(
        x, t.tensor(Y[::-1].copy()), t.tensor(np.array([1, -1, 1, -1])), margin=0.2)),
    "triplet p=1.5 swap": (Y, lambda t, F, x: F.triplet_margin_loss(
        x, t.tensor(Y[::-1].copy()), t.tensor(Y * 0.5), margin=0.5, p=1.5, swap=True)),
    "triplet with distance": (Y, lambda t, F, x: F.triplet_margin_with_distance_loss(
        x, t.tensor(Y[::-1].copy()), t.tensor(Y * 0.5), distance_function=lambda a, b: (a - b).abs().sum(1),
        margin=2.0)),
    "poisson_nll full": (Y, lambda t, F, x: F.poisson_nll_loss(x, t.tensor(np.abs(Y) * 3), log_input=True, full=True)),
    "poisson_nll rates": (np.abs(Y) + 0.1, lambda t, F, x: F.poisson_nll_loss(
        x, t.tensor(np.abs(Y[::-1].copy()) * 3), log_input=False, full=True, reduction="sum")),
    "gaussian_nll full": (Y, lambda t, F, x: F.gaussian_nll_loss(
        x, t.tensor(Y[::-1].copy()), t.tensor(np.abs(Y) + 0.1), full=True)),
    "ctc sum zero_infinity": (CTC_LOGITS, lambda t, F, x: F.ctc_loss(
        t.log_softmax(x, 2), t.tensor(np.array([[1, 2, 3], [3, 3, 0]])), t.tensor(np.array([6, 5])),
        t.tensor(np.array([3, 2])), reduction="sum", zero_infinity=True)),
    # log_probs as the leaf: PyTorch's gradient is the one with respect to log_softmax's logits
    "ctc leaf log_probs, short input, blank 3": (np.log(_softmax(CTC_LOGITS)), lambda t, F, x: F.ctc_loss(
        x, t.tensor(np.array([1, 2, 1])), [6, 4], [2, 1], blank=3)),
    "ctc leaf log_probs unbatched": (np.log(_softmax(CTC_LOGITS[:, 0])), lambda t, F, x: F.ctc_loss(
        x, t.tensor(np.array([1, 2])), [6], [2], reduction="sum")),
}


def _loss_and_grad(torch, case):
    array, fn = case
    x = torch.tensor(array.copy()).requires_grad_()
    loss = fn(torch, torch.nn.functional, x)
    loss.sum().backward()
    return loss.detach().numpy(), x.grad.numpy()


@needs_torch
@pytest.mark.parametrize("name", list(CASES))
def test_loss_and_gradient_equal_pytorch(name):
    ours, our_grad = _loss_and_grad(trainrun, CASES[name])
    theirs, their_grad = _loss_and_grad(peer, CASES[name])
    assert ours.shape == theirs.shape and np.allclose(ours, theirs, rtol=1e-4, atol=1e-5), (ours, theirs)
    assert np.allclose(our_grad, their_grad, rtol=1e-4, atol=1e-5), (our_grad, their_grad)
