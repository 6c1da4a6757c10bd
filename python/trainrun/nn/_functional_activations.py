"""Activation functions of torch.nn.functional, as composites of core ops
(so their gradients come from the core's). inplace=True writes the result
back into the input, as PyTorch's."""
from trainrun import _C
from trainrun._op_table import op


def _out(input, result, inplace):  # noqa: A002
    """(For results whose backward does not read input: relu's reads its output.)"""
    return input.copy_(result) if inplace else result


def _apply(input, inplace, fn):  # noqa: A002
    """fn(input), written back into input with inplace=True (computed from a copy while autograd records: the
    backward may read the input, which the write-back overwrites)."""
    if not inplace:
        return fn(input)
    from trainrun._tensor import _inplace_operand
    return input.copy_(fn(_inplace_operand(input)))


def _scalar(value, like):
    return _C.full([], value, dtype=like.dtype, device=like.device)


@op(function=False, functional=True)
def relu(input, inplace=False):  # noqa: A002
    return _out(input, _C.relu(input), inplace)


@op(function=False, functional=True)
def relu_(input):  # noqa: A002
    return input.copy_(_C.relu(input))


@op(function=False, functional=True)
def relu6(input, inplace=False):  # noqa: A002
    return _apply(input, inplace, lambda input: _C.clamp(input, 0, 6))


@op(function=False, functional=True)
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    return _apply(input, inplace, lambda input: _C.clamp(input, min_val, max_val))


@op(function=False, functional=True)
def threshold(input, threshold, value, inplace=False):  # noqa: A002
    return _apply(input, inplace, lambda input: _C.where(input > threshold, input, _scalar(value, input)))


@op(function=False, functional=True)
def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    return _apply(input, inplace, lambda input: _C.where(input > 0, input, input * negative_slope))


@op(function=False, functional=True)
def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    # exp only of the non-positive part: the unused branch must not overflow (its gradient would be NaN).
    negative = (_C.exp(_C.clamp(input, None, 0)) - 1.0) * alpha
    return _apply(input, inplace, lambda input: _C.where(input > 0, input, negative))


@op(function=False, functional=True)
def celu(input, alpha=1.0, inplace=False):  # noqa: A002
    negative = (_C.exp(_C.clamp(input, None, 0) / alpha) - 1.0) * alpha
    return _apply(input, inplace, lambda input: _C.where(input > 0, input, negative))


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


@op(function=False, functional=True)
def selu(input, inplace=False):  # noqa: A002
    return _apply(input, inplace, lambda input: elu(input, _SELU_ALPHA) * _SELU_SCALE)


@op(function=False, functional=True)
def gelu(input, approximate="none"):  # noqa: A002
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    return _C.gelu(input, approximate)


@op(function=False, functional=True)
def silu(input, inplace=False):  # noqa: A002
    return _apply(input, inplace, lambda input: _C.silu(input))


@op(function=False, functional=True)
def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (as PyTorch's)."""
    scaled = input * beta
    soft = _C.log1p(_C.exp(_C.clamp(scaled, None, threshold))) / beta
    return _C.where(scaled > threshold, input, soft)


@op(function=False, functional=True)
def mish(input, inplace=False):  # noqa: A002
    return _apply(input, inplace, lambda input: input * _C.tanh(softplus(input)))


@op(function=False, functional=True)
def hardsigmoid(input, inplace=False):  # noqa: A002
    return _apply(input, inplace, lambda input: _C.clamp(input / 6.0 + 0.5, 0, 1))


@op(function=False, functional=True)
def hardswish(input, inplace=False):  # noqa: A002
    return _apply(input, inplace, lambda input: input * _C.clamp(input + 3.0, 0, 6) / 6.0)


@op(function=False, functional=True)
def logsigmoid(input):  # noqa: A002
    return -softplus(-input)


@op(function=False, functional=True)
def softsign(input):  # noqa: A002
    return input / (input.abs() + 1.0)


@op(function=False, functional=True)
def tanhshrink(input):  # noqa: A002
    return input - _C.tanh(input)


@op(function=False, functional=True)
def softshrink(input, lambd=0.5):  # noqa: A002
    return _C.where(input > lambd, input - lambd, _C.where(input < -lambd, input + lambd, input * 0.0))


@op(function=False, functional=True)
def hardshrink(input, lambd=0.5):  # noqa: A002
    return _C.where((input > lambd) | (input < -lambd), input, input * 0.0)


@op(function=False, functional=True)
def glu(input, dim=-1):  # noqa: A002
    if input.shape[dim] % 2:
        raise ValueError(f"glu(): dim {dim} must have an even size, got {input.shape[dim]}")
    a, b = _C.chunk(input, 2, dim)
    return a * _C.sigmoid(b)


@op(function=False, functional=True)
def sigmoid(input):  # noqa: A002
    return _C.sigmoid(input)


@op(function=False, functional=True)
def tanh(input):  # noqa: A002
    return _C.tanh(input)


@op(function=False, functional=True)
def softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    return _C.softmax(input, _implicit_dim(input, dim), dtype)


@op(function=False, functional=True)
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    return _C.log_softmax(input, _implicit_dim(input, dim), dtype)


@op(function=False, functional=True)
def softmin(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    return _C.softmax(-input, _implicit_dim(input, dim), dtype)


def _implicit_dim(input, dim):  # noqa: A002
    """PyTorch's (deprecated) choice when dim is None: 0 for 0-, 1- and 3-D inputs, else 1."""
    if dim is not None:
        return dim
    return 0 if input.ndim in (0, 1, 3) else 1


@op(function=False, functional=True)
def prelu(input, weight):  # noqa: A002
    w = weight if weight.numel() == 1 or input.ndim < 2 else weight.reshape([-1] + [1] * (input.ndim - 2))
    return _C.where(input > 0, input, input * w)


@op(function=False, functional=True)
def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):  # noqa: A002
    if training:  # a slope from U(lower, upper) for each input <= 0, drawn in order as PyTorch's (a double each)
        negative = input.detach() <= 0
        draws = _C.empty([int(negative.sum().item())], _C.dtype.float64, input.device).uniform_(lower, upper)
        slope = _C.ones(list(input.shape), input.dtype, input.device).masked_scatter(negative, draws.to(input.dtype))
        return _apply(input, inplace, lambda input: input * slope)
    return leaky_relu(input, (lower + upper) / 2, inplace)



@op(function=False, functional=True)
def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel noise) / tau); hard: the one-hot of its argmax in the forward, the soft sample's
    gradient in the backward (straight-through)."""
    gumbels = -_C.log(_C.empty(list(logits.shape), dtype=logits.dtype, device=logits.device).exponential_())
    soft = _C.softmax((logits + gumbels) / tau, dim, None)
    if not hard:
        return soft
    index = soft.argmax(dim=dim, keepdim=True)
    one_hot = _C.zeros(list(soft.shape), dtype=soft.dtype, device=soft.device).scatter_(dim, index, 1.0)
    return one_hot - soft.detach() + soft
