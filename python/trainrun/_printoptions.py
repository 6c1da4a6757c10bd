"""torch.set_printoptions: precision, threshold, edgeitems, linewidth, sci_mode and the named profiles. With
the defaults, tensors print through the C++ formatter; once an option differs, through numpy's (which lays
values out the way PyTorch does), wrapped as tensor(...)."""
import numpy as np

_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
_PROFILES = {"default": dict(_DEFAULTS), "short": {"precision": 2, "threshold": 1000, "edgeitems": 2,
                                                   "linewidth": 80, "sci_mode": None},
             "full": {"precision": 4, "threshold": float("inf"), "edgeitems": 3, "linewidth": 80, "sci_mode": None}}
OPTIONS = dict(_DEFAULTS)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """PyTorch's: a profile ('default', 'short', 'full') first, then the options given."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: unknown profile {profile!r} (default, short, full)")
        OPTIONS.update(_PROFILES[profile])
    for key, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                       ("linewidth", linewidth)):
        if value is not None:
            OPTIONS[key] = value
    OPTIONS["sci_mode"] = sci_mode


def get_printoptions():
    return dict(OPTIONS)


def customized():
    return OPTIONS != _DEFAULTS


def format_values(tensor):
    """'tensor(<values>' (no closing parenthesis) with the current options, for a CPU-readable tensor."""
    values = tensor.detach().to("cpu")
    if values.dtype.is_floating_point and values.dtype.name not in ("float32", "float64"):
        values = values.float()
    array = np.asarray(values.numpy())
    threshold = OPTIONS["threshold"]
    text = np.array2string(array, precision=OPTIONS["precision"], separator=", ",
                           threshold=int(min(threshold, 2 ** 62)), edgeitems=OPTIONS["edgeitems"],
                           max_line_width=OPTIONS["linewidth"], prefix="tensor(",
                           suppress_small=OPTIONS["sci_mode"] is False,
                           floatmode="fixed" if OPTIONS["sci_mode"] is False else "maxprec_equal")
    return "tensor(" + text
