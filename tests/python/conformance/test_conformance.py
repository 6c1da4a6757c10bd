"""The conformance suite: every idiom of idioms.py run under PyTorch 1.13
and under trainrun, comparing results (values, dtypes, shapes) or exception
types. Idioms trainrun does not pass yet are listed in KNOWN_GAPS and marked
xfail(strict): one that starts passing fails the suite until it is taken off
the list, so the count only goes up. `python3 tests/python/conformance/
test_conformance.py` prints "N of M idioms"."""
import importlib
import importlib.abc
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(HERE))
from idioms import IDIOMS as _BASE_IDIOMS  # noqa: E402
from idioms_ops import IDIOMS_OPS  # noqa: E402

IDIOMS = _BASE_IDIOMS + IDIOMS_OPS

def _namespace(lib):
    if lib == "torch":
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    else:
        import trainrun as torch
        import trainrun.nn as nn
        import trainrun.nn.functional as F
    x = torch.tensor((np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5) / 2)
    return {"torch": torch, "nn": nn, "F": F, "np": np, "x": x}


def _plain(value):
    """A result as comparable plain data: tensors as (shape, dtype name, values)."""
    if hasattr(value, "tolist") and hasattr(value, "dtype") and hasattr(value, "shape"):
        dtype = str(value.dtype).split(".")[-1]
        values = value.detach().tolist() if hasattr(value, "detach") else value.tolist()
        return ("tensor", tuple(value.shape), dtype, values)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 5)
    return value


def _close(a, b):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        if not (isinstance(b, tuple) and b[:3] == a[:3]):
            return False
        return np.allclose(np.array(a[3], dtype=np.float64), np.array(b[3], dtype=np.float64), rtol=1e-4,
                           atol=1e-5, equal_nan=True)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(p, q) for p, q in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= 1e-4 * max(1, abs(b))
    return a == b


_ERROR_FAMILIES = {"IndexError": "IndexError", "ValueError": "ValueError/RuntimeError",
                   "RuntimeError": "ValueError/RuntimeError", "TypeError": "TypeError"}


class _TorchAsTrainrun(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`from torch.a.b import c` resolves to trainrun.a.b while an idiom runs (what `import trainrun as
    torch` means for a script's other imports)."""

    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("trainrun" + spec.name[len("torch"):])

    def exec_module(self, module):
        pass


def _alias_torch_to_trainrun():
    import trainrun
    saved = {name: module for name, module in sys.modules.items() if name == "torch" or name.startswith("torch.")}
    for name in saved:
        del sys.modules[name]
    sys.modules["torch"] = trainrun
    finder = _TorchAsTrainrun()
    sys.meta_path.insert(0, finder)
    return saved, finder


def _restore(state):
    saved, finder = state
    sys.meta_path.remove(finder)
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        del sys.modules[name]
    sys.modules.update(saved)


def run(lib, code):
    saved = _alias_torch_to_trainrun() if lib == "trainrun" else None
    try:
        ns = _namespace(lib)
        try:
            exec(code, ns)  # noqa: S102  (our own idioms)
        except Exception as e:  # the exception's family is the result
            return ("raises", _ERROR_FAMILIES.get(type(e).__name__, type(e).__name__))
        return _plain(ns["result"])
    finally:
        if saved is not None:
            _restore(saved)


def conforms(code):
    return _close(run("trainrun", code), run("torch", code))


try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:  # pragma: no cover
    HAVE_TORCH = False

KNOWN_GAPS = {  # idioms trainrun does not pass yet (issue 15): take each off as it is fixed
}


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch (python3-torch) is not installed")
@pytest.mark.parametrize("name,code", [pytest.param(n, c, marks=pytest.mark.xfail(strict=True, reason="known gap"))
                                       if n in KNOWN_GAPS else (n, c) for n, c in IDIOMS], ids=[n for n, _ in IDIOMS])
def test_idiom(name, code):
    ours, theirs = run("trainrun", code), run("torch", code)
    assert _close(ours, theirs), f"{name}:\n  trainrun: {ours}\n  torch:    {theirs}"


def test_idiom_names_are_unique():
    names = [n for n, _ in IDIOMS]
    assert len(names) == len(set(names))


if __name__ == "__main__":
    passed = [n for n, c in IDIOMS if conforms(c)]
    print(f"{len(passed)} of {len(IDIOMS)} idioms")
    for n, c in IDIOMS:
        if n not in passed:
            print("  gap:", n)
