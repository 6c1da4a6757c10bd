"""trainrun.testing.assert_close: PyTorch's closeness check for tests, with
its default tolerances per dtype and its messages (which elements, how far,
how much was allowed). Compares tensors, NumPy arrays, Python numbers, and
sequences and mappings of them, recursively."""
import collections.abc
import math

import numpy as np

from trainrun import _C

# (rtol, atol) by dtype, as PyTorch's defaults.
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7)}


def _dtype_name(t):
    return str(t.dtype).rsplit(".", 1)[-1]


def _tolerances(actual, expected, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    if rtol is not None:
        return rtol, atol
    candidates = [_TOLERANCES.get(_dtype_name(t), (0.0, 0.0)) for t in (actual, expected)]
    return max(c[0] for c in candidates), max(c[1] for c in candidates)


def _fail(msg, default):
    raise AssertionError(msg if isinstance(msg, str) else msg(default) if callable(msg) else default)


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, path):
    where = f" for item {path}" if path else ""
    checks = [("shape", actual.shape, expected.shape)]
    checks += [("device", actual.device, expected.device)] if check_device else []
    checks += [("dtype", actual.dtype, expected.dtype)] if check_dtype else []
    checks += [("stride()", actual.stride(), expected.stride())] if check_stride else []
    for attribute, a, e in checks:
        if a != e:
            _fail(msg, f"The values for attribute '{attribute}' do not match{where}: {a} != {e}.")
    rtol, atol = _tolerances(actual, expected, rtol, atol)
    a = actual.detach().cpu().to(_C.dtype.float64).numpy() if actual.is_floating_point() or \
        actual.dtype != expected.dtype else actual.detach().cpu().numpy()
    e = expected.detach().cpu().to(_C.dtype.float64).numpy() if expected.is_floating_point() or \
        actual.dtype != expected.dtype else expected.detach().cpu().numpy()
    if a.dtype == np.bool_ or e.dtype == np.bool_:
        close = a == e
    else:
        a, e = a.astype(np.float64), e.astype(np.float64)
        close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if close.all():
        return
    bad = ~close
    total = close.size
    verdict = "equal" if rtol == 0 and atol == 0 else "close"  # PyTorch's wording for exact comparisons
    lines = [f"Tensor-likes are not {verdict}{where}!", "",
             f"Mismatched elements: {int(bad.sum())} / {total} ({100.0 * bad.sum() / total:.1f}%)"]
    if a.dtype != np.bool_:
        with np.errstate(divide="ignore", invalid="ignore"):
            absolute = np.where(bad, np.abs(a - e), 0.0)
            relative = np.where(bad, np.abs(a - e) / np.abs(e), 0.0)
        absolute, relative = np.nan_to_num(absolute, nan=np.inf), np.nan_to_num(relative, nan=np.inf)
        i, j = np.unravel_index(np.argmax(absolute), a.shape), np.unravel_index(np.argmax(relative), a.shape)
        lines.append(f"Greatest absolute difference: {absolute[i]} at index {tuple(int(x) for x in i)} "
                     f"(up to {atol} allowed)")
        lines.append(f"Greatest relative difference: {relative[j]} at index {tuple(int(x) for x in j)} "
                     f"(up to {rtol} allowed)")
    _fail(msg, "\n".join(lines))


def _compare_scalars(actual, expected, rtol, atol, equal_nan, msg, path):
    where = f" for item {path}" if path else ""
    if type(actual) is not type(expected) and not (isinstance(actual, (int, float)) and
                                                    isinstance(expected, (int, float))):
        _fail(msg, f"The values for attribute 'type' do not match{where}: {type(actual)} != {type(expected)}.")
    if rtol is None and atol is None:
        rtol, atol = (1e-7, 1e-7) if isinstance(actual, float) or isinstance(expected, float) else (0.0, 0.0)
    elif (rtol is None) != (atol is None):
        _tolerances(None, None, rtol, atol)
    if actual == expected or (equal_nan and math.isnan(actual) and math.isnan(expected)):
        return
    difference = abs(actual - expected)
    if difference <= atol + rtol * abs(expected):
        return
    relative = difference / abs(expected) if expected != 0 else math.inf
    verdict = "equal" if rtol == 0 and atol == 0 else "close"
    _fail(msg, f"Scalars are not {verdict}{where}!\n\nExpected {expected} but got {actual}.\n"
               f"Absolute difference: {difference} (up to {atol} allowed)\n"
               f"Relative difference: {relative} (up to {rtol} allowed)")


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None, _path=""):
    """Raises AssertionError unless actual and expected are close:
    |actual - expected| <= atol + rtol * |expected| elementwise, with matching shapes (and dtypes and
    devices unless told otherwise)."""
    if isinstance(actual, np.ndarray):
        actual = _C.from_numpy(np.require(actual, requirements="C"))
    if isinstance(expected, np.ndarray):
        expected = _C.from_numpy(np.require(expected, requirements="C"))
    if _C._is_cpp_tensor(actual) and _C._is_cpp_tensor(expected):
        return _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride,
                                msg, _path)
    if hasattr(actual, "full_tensor") and hasattr(expected, "full_tensor"):  # DTensors: their global values (a
        # collective, as each rank compares), whatever their placements
        return assert_close(actual.full_tensor(), expected.full_tensor(), allow_subclasses=allow_subclasses, rtol=rtol,
                            atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype,
                            check_layout=check_layout, check_stride=check_stride, msg=msg, _path=_path)
    if _C._is_cpp_tensor(actual) or _C._is_cpp_tensor(expected):
        raise AssertionError(f"The values for attribute 'type' do not match{' for item ' + _path if _path else ''}:"
                             f" {type(actual)} != {type(expected)}.")
    if isinstance(actual, (bool, int, float)) and isinstance(expected, (bool, int, float)):
        return _compare_scalars(actual, expected, rtol, atol, equal_nan, msg, _path)
    options = dict(allow_subclasses=allow_subclasses, rtol=rtol, atol=atol, equal_nan=equal_nan,
                   check_device=check_device, check_dtype=check_dtype, check_layout=check_layout,
                   check_stride=check_stride, msg=msg)
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        if set(actual) != set(expected):
            raise AssertionError(f"The keys of the mappings do not match: {sorted(map(str, actual))} != "
                                 f"{sorted(map(str, expected))}")
        for key in expected:
            assert_close(actual[key], expected[key], **options, _path=f"{_path}[{key!r}]")
        return
    if isinstance(actual, collections.abc.Sequence) and isinstance(expected, collections.abc.Sequence) and \
            not isinstance(actual, str) and not isinstance(expected, str):
        if len(actual) != len(expected):
            raise AssertionError(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, **options, _path=f"{_path}[{i}]")
        return
    if actual == expected:
        return
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.")


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """The deprecated spelling: dtypes may differ."""
    import trainrun
    if not _C._is_cpp_tensor(actual):
        actual = trainrun.tensor(actual)
    if not _C._is_cpp_tensor(expected):
        expected = trainrun.tensor(expected, dtype=actual.dtype)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=False,
                 msg=msg or None)


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of random values for tests, as torch.testing.make_tensor: floats uniform in [low, high) (default
    [-9, 9)), integers in [low, high) (default [-9, 10), bool: True or False); noncontiguous gives a tensor with
    the same values that is not contiguous; exclude_zero replaces zeros by a small value of the dtype."""
    import trainrun
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, trainrun.Size)):
        shape = tuple(shape[0])
    shape = [int(s) for s in shape]
    if dtype == trainrun.bool:
        result = trainrun.randint(0, 2, shape, device=device).to(trainrun.bool)
    elif dtype.is_floating_point:
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        if lo > hi:
            raise ValueError(f"make_tensor: low ({low}) must not be greater than high ({high})")
        result = (trainrun.rand(shape, device=device) * (hi - lo) + lo).to(dtype)
    else:
        lo = -9 if low is None else int(low)
        hi = 10 if high is None else int(high)
        if lo >= hi:
            raise ValueError(f"make_tensor: low ({low}) must be less than high ({high}) for integer dtypes")
        result = trainrun.randint(lo, hi, shape, device=device, dtype=dtype)
    if exclude_zero and dtype != trainrun.bool:
        tiny = trainrun.finfo(dtype).tiny if dtype.is_floating_point else 1
        result = trainrun.where(result == 0, trainrun.full_like(result, tiny), result)
    if noncontiguous and result.numel() > 1:
        doubled = trainrun.repeat_interleave(result, 2, dim=-1)
        result = doubled[..., ::2]
    elif memory_format is not None:
        result = result.contiguous(memory_format=memory_format)
    if requires_grad:
        result.requires_grad_(True)
    return result
