"""Modules that only hold options and call their functional form: the
activations and the losses. Each is declared once, in the two tables below,
with PyTorch's constructor signature; the classes are generated from them,
so `nn.LeakyReLU(0.2, inplace=True)` keeps `negative_slope` and `inplace` as
attributes and calls F.leaky_relu(x, negative_slope=0.2, inplace=True)."""
import functools
import inspect

from trainrun.nn import functional as F
from trainrun.nn._functional_losses import legacy_reduction
from trainrun.nn._module import Module

_ = inspect.Parameter.empty

# class name -> (functional form, constructor parameters with defaults (_ = required), inputs)
ACTIVATIONS = {
    "ReLU": (F.relu, [("inplace", False)]),
    "ReLU6": (F.relu6, [("inplace", False)]),
    "Hardtanh": (F.hardtanh, [("min_val", -1.0), ("max_val", 1.0), ("inplace", False)]),
    "Threshold": (F.threshold, [("threshold", _), ("value", _), ("inplace", False)]),
    "LeakyReLU": (F.leaky_relu, [("negative_slope", 0.01), ("inplace", False)]),
    "ELU": (F.elu, [("alpha", 1.0), ("inplace", False)]),
    "CELU": (F.celu, [("alpha", 1.0), ("inplace", False)]),
    "SELU": (F.selu, [("inplace", False)]),
    "GELU": (F.gelu, [("approximate", "none")]),
    "SiLU": (F.silu, [("inplace", False)]),
    "Mish": (F.mish, [("inplace", False)]),
    "Softplus": (F.softplus, [("beta", 1.0), ("threshold", 20.0)]),
    "Hardsigmoid": (F.hardsigmoid, [("inplace", False)]),
    "Hardswish": (F.hardswish, [("inplace", False)]),
    "Sigmoid": (F.sigmoid, []),
    "Tanh": (F.tanh, []),
    "LogSigmoid": (F.logsigmoid, []),
    "Softsign": (F.softsign, []),
    "Tanhshrink": (F.tanhshrink, []),
    "Softshrink": (F.softshrink, [("lambd", 0.5)]),
    "Hardshrink": (F.hardshrink, [("lambd", 0.5)]),
    "GLU": (F.glu, [("dim", -1)]),
    "Softmax": (F.softmax, [("dim", None)]),
    "LogSoftmax": (F.log_softmax, [("dim", None)]),
    "Softmin": (F.softmin, [("dim", None)]),
    "Dropout": (F.dropout, [("p", 0.5), ("inplace", False)]),
    "Dropout1d": (F.dropout1d, [("p", 0.5), ("inplace", False)]),
    "Dropout2d": (F.dropout2d, [("p", 0.5), ("inplace", False)]),
    "Dropout3d": (F.dropout3d, [("p", 0.5), ("inplace", False)]),
    "AlphaDropout": (F.alpha_dropout, [("p", 0.5), ("inplace", False)]),
    "FeatureAlphaDropout": (F.feature_alpha_dropout, [("p", 0.5), ("inplace", False)]),
    "RReLU": (F.rrelu, [("lower", 1.0 / 8), ("upper", 1.0 / 3), ("inplace", False)]),
    "LocalResponseNorm": (F.local_response_norm, [("size", _), ("alpha", 1e-4), ("beta", 0.75), ("k", 1.0)]),
    "ChannelShuffle": (F.channel_shuffle, [("groups", _)]),
}
# Those whose functional form takes training= (they follow train()/eval()).
_TAKES_TRAINING = {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout,
                   F.rrelu}

_LEGACY = [("size_average", None), ("reduce", None)]
LOSSES = {
    "CrossEntropyLoss": (F.cross_entropy, [("weight", None)] + _LEGACY[:1] + [("ignore_index", -100)] + _LEGACY[1:] +
                         [("reduction", "mean"), ("label_smoothing", 0.0)], 2),
    "NLLLoss": (F.nll_loss, [("weight", None)] + _LEGACY[:1] + [("ignore_index", -100)] + _LEGACY[1:] +
                [("reduction", "mean")], 2),
    "MSELoss": (F.mse_loss, _LEGACY + [("reduction", "mean")], 2),
    "L1Loss": (F.l1_loss, _LEGACY + [("reduction", "mean")], 2),
    "SmoothL1Loss": (F.smooth_l1_loss, _LEGACY + [("reduction", "mean"), ("beta", 1.0)], 2),
    "HuberLoss": (F.huber_loss, [("reduction", "mean"), ("delta", 1.0)], 2),
    "BCELoss": (F.binary_cross_entropy, [("weight", None)] + _LEGACY + [("reduction", "mean")], 2),
    "BCEWithLogitsLoss": (F.binary_cross_entropy_with_logits, [("weight", None)] + _LEGACY +
                          [("reduction", "mean"), ("pos_weight", None)], 2),
    "KLDivLoss": (F.kl_div, _LEGACY + [("reduction", "mean"), ("log_target", False)], 2),
    "SoftMarginLoss": (F.soft_margin_loss, _LEGACY + [("reduction", "mean")], 2),
    "MarginRankingLoss": (F.margin_ranking_loss, [("margin", 0.0)] + _LEGACY + [("reduction", "mean")], 3),
    "HingeEmbeddingLoss": (F.hinge_embedding_loss, [("margin", 1.0)] + _LEGACY + [("reduction", "mean")], 2),
    "CosineEmbeddingLoss": (F.cosine_embedding_loss, [("margin", 0.0)] + _LEGACY + [("reduction", "mean")], 3),
    "PoissonNLLLoss": (F.poisson_nll_loss, [("log_input", True), ("full", False)] + _LEGACY[:1] +
                       [("eps", 1e-8)] + _LEGACY[1:] + [("reduction", "mean")], 2),
    "GaussianNLLLoss": (F.gaussian_nll_loss, [("full", False), ("eps", 1e-6), ("reduction", "mean")], 3),
    "TripletMarginLoss": (F.triplet_margin_loss, [("margin", 1.0), ("p", 2.0), ("eps", 1e-6), ("swap", False)] +
                          _LEGACY + [("reduction", "mean")], 3),
    "MultiLabelSoftMarginLoss": (F.multilabel_soft_margin_loss, [("weight", None)] + _LEGACY +
                                 [("reduction", "mean")], 2),
    "MultiLabelMarginLoss": (F.multilabel_margin_loss, _LEGACY + [("reduction", "mean")], 2),
    "TripletMarginWithDistanceLoss": (F.triplet_margin_with_distance_loss, [("distance_function", None),
                                                                           ("margin", 1.0), ("swap", False),
                                                                           ("reduction", "mean")], 3),
    "CTCLoss": (F.ctc_loss, [("blank", 0), ("reduction", "mean"), ("zero_infinity", False)], 4),
    "MultiMarginLoss": (F.multi_margin_loss, [("p", 1), ("margin", 1.0), ("weight", None)] + _LEGACY +
                        [("reduction", "mean")], 2),
}


def _signature(params):
    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
                              for n, d in params])


# A module's forward whose argument names are not its functional's first ones (PyTorch's names).
_FORWARD_NAMES = {"PoissonNLLLoss": ("log_input", "target")}


def _declare(name, function, params, inputs, base):
    signature = _signature(params)
    names = [n for n, _ in params]
    takes_training = function in _TAKES_TRAINING
    # Looked up in F at each call: a layer above nn (DTensor) may wrap F's functions after these classes exist.
    function_name = next(n for n, v in vars(F).items() if v is function)

    def __init__(self, *args, **kwargs):
        base.__init__(self)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{name}(): {e}") from None
        bound.apply_defaults()
        if "reduction" in bound.arguments:
            bound.arguments["reduction"] = legacy_reduction(name, bound.arguments.get("size_average"),
                                                            bound.arguments.get("reduce"), bound.arguments["reduction"])
        for key, value in bound.arguments.items():
            if key not in ("size_average", "reduce"):
                setattr(self, key, value)

    input_names = _FORWARD_NAMES.get(name) or tuple(inspect.signature(function).parameters)[:inputs]
    forward_signature = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                           for n in ("self",) + tuple(input_names)])

    def forward(self, *tensors, **named):
        if named or len(tensors) != inputs:  # (by keyword, as PyTorch's: criterion(input=..., target=...))
            try:
                bound = forward_signature.bind(self, *tensors, **named)
            except TypeError as e:
                raise TypeError(f"{name}.forward(): {e}") from None
            tensors = tuple(bound.arguments[n] for n in input_names)
        options = {n: getattr(self, n) for n in names if n not in ("size_average", "reduce")}
        if takes_training:
            options["training"] = self.training
        return getattr(F, function_name)(*tensors, **options)

    shows_inplace = "Dropout" in name  # (PyTorch's: activations show inplace only when set; dropouts always)

    def extra_repr(self):
        return ", ".join(f"{n}={getattr(self, n)!r}" for n in names if n not in ("size_average", "reduce") and
                         (getattr(self, n) is not None or n == "dim") and
                         not (n == "inplace" and not getattr(self, n) and not shows_inplace))

    if issubclass(base, _Loss):  # (PyTorch prints a loss module bare: MSELoss())
        def extra_repr(self):  # noqa: F811
            return ""

    __init__.__signature__ = signature
    forward.__signature__ = forward_signature
    cls = type(name, (base,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                               "__doc__": f"nn.{name}: calls F.{function.__name__} with the options it was built "
                                          f"with{signature}."})
    cls.__module__ = "trainrun.nn"
    return cls


class _Loss(Module):
    """The base of the loss modules (criterion.reduction is an attribute, as PyTorch's)."""


class _WeightedLoss(_Loss):
    pass


@functools.lru_cache(maxsize=None)  # one class per name: nn.Dropout is the class nn.Transformer's layers use
def declared():
    out = {name: _declare(name, fn, params, 1, Module) for name, (fn, params) in ACTIVATIONS.items()}
    for name, (fn, params, inputs) in LOSSES.items():
        weighted = any(n == "weight" for n, _ in params)
        out[name] = _declare(name, fn, params, inputs, _WeightedLoss if weighted else _Loss)
    return out
