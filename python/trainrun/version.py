"""torch.version: __version__ (the PyTorch API level trainrun follows, with its own build after the '+':
scripts compare it, `torch.__version__ >= "2.0"`), cuda (the CUDA runtime the build compiled against, even on a
machine without a GPU, as PyTorch's), hip (None), git_version and debug."""
import functools

from trainrun import _C


@functools.total_ordering
class TorchVersion(str):
    """A version string that compares by release numbers with strings and tuples, as torch.torch_version's."""

    def _release(self):
        return _release(str(self))

    def __eq__(self, other):
        return self._release() == _release(other)

    def __lt__(self, other):
        return self._release() < _release(other)

    __hash__ = str.__hash__


def _release(value):
    if isinstance(value, (tuple, list)):
        parts = [int(v) for v in value]
    else:
        text = str(value).split("+", 1)[0]
        parts = []
        for piece in text.split("."):
            digits = "".join(ch for ch in piece if ch.isdigit()) if piece else ""
            if not digits:
                break
            parts.append(int(digits))
            if not piece.isdigit():
                break
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


__version__ = TorchVersion("2.6.0+trainrun")
cuda = _C._cuda.compiled_version() if hasattr(_C._cuda, "compiled_version") else None
hip = None
debug = False
git_version = "unknown"
