"""The preamble of the Python suites: import trainrun from the source tree
(skipping the whole module, with the reason, when its extension is not
built) and PyTorch 1.13 when it is installed.

    from built_tree import ROOT, torch, needs_torch   # before `import trainrun`"""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
if not (ROOT / "bazel-bin" / "python" / "trainrun" / "_C.so").exists():
    pytest.skip("trainrun._C is not built (bazel build //python:trainrun/_C.so)", allow_module_level=True)

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (python3-torch) is not installed")
