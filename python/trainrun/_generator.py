"""trainrun.Generator and trainrun.randperm, as PyTorch's CPU generator.

A Generator holds a C++ generator (tensor/generator.h): the Mersenne Twister
PyTorch's CPU generator is, seeded the same way, from which CPU draws are
made as PyTorch's CPU kernels make them (rand, randn, randint, randperm,
bernoulli, dropout, the nn.init fills, multinomial, ...). So after
`manual_seed(s)` trainrun and PyTorch draw the same values, initialise the
same weights and shuffle data in the same order. `default_generator` is the
one trainrun.manual_seed seeds. get_state() is PyTorch's state layout
(5056 bytes): torch.get_rng_state() and trainrun's are interchangeable."""
import random as _random

import numpy as np

from trainrun import _C

_DEFAULT_SEED = 67280421310721  # what torch.Generator() starts from


class Generator:
    """A CPU random generator with PyTorch's seeding and draw order."""

    def __init__(self, device="cpu", *, _cpp=None):
        if str(device) != "cpu":
            raise ValueError(f"Generator: only device='cpu' is supported, got {device!r}")
        self.device = _C.device("cpu")
        self._cpp = _cpp if _cpp is not None else _C._Generator()
        if _cpp is None:
            self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed):
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"manual_seed expected an int, got {type(seed).__name__}")
        self._cpp.manual_seed(int(seed) % (1 << 64))
        return self

    def initial_seed(self):
        return self._cpp.initial_seed()

    def seed(self):
        """Seeds from the operating system's entropy; returns the seed."""
        s = _random.SystemRandom().getrandbits(63)
        self.manual_seed(s)
        return s

    def get_state(self):
        """The engine's state as a uint8 tensor in PyTorch's layout; set_state takes it (or PyTorch's) back."""
        return _C.from_numpy(np.frombuffer(self._cpp.get_state(), dtype=np.uint8).copy())

    def set_state(self, new_state):
        data = np.asarray(new_state.detach().cpu().numpy() if hasattr(new_state, "numpy") else new_state,
                          dtype=np.uint8)
        if data.ndim != 1:
            raise RuntimeError(f"Generator.set_state: expected a 1-D uint8 tensor, got shape {list(data.shape)}")
        self._cpp.set_state(data.tobytes())
        return self

    def _note_draw(self):
        """Draws made from Python (a sampler's) cannot be replayed by a compiled call's recording: reading the
        engine while a call records breaks the recording, so that call runs eagerly and draws anew each time."""
        if _C._capture_active():
            _C._note_graph_break("a draw from a trainrun.Generator in Python (a sampler's, or randperm) runs "
                                 "outside the recorded ops, which a replay would not repeat")

    def _random32(self, count):
        """The next `count` 32-bit outputs of the engine, as Python ints."""
        self._note_draw()
        return self._cpp.random32(count) if count > 0 else []

    def _random63(self):
        """A non-negative 63-bit draw: PyTorch's int64 random_() (two 32-bit outputs, high first)."""
        self._note_draw()
        return self._cpp.random64() % (1 << 63)


default_generator = Generator(_cpp=_C._default_generator())


def _cpp_of(generator, where):
    """The C++ generator behind `generator` (None: the default one)."""
    if generator is None:
        return None
    if not isinstance(generator, Generator):
        raise TypeError(f"{where}(): generator must be a trainrun.Generator, not {type(generator).__name__}")
    return generator._cpp


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
             requires_grad=False):
    """A random permutation of 0..n-1 (trainrun.int64 unless dtype says otherwise), PyTorch's for the seed."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"randperm(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise ValueError(f"randperm(): n must be non-negative, got {n}")
    cpp = _cpp_of(generator, "randperm")
    (generator or default_generator)._note_draw()
    result = _C._ops.randperm(int(n), cpp)
    if dtype is not None:
        result = result.to(dtype)
    if device is not None:
        result = result.to(device)
    if out is not None:  # (PyTorch's out= rules: resized to n, an empty out included)
        from trainrun._out_arguments import _write
        return _write("randperm", out, result)
    if requires_grad:
        result.requires_grad_(True)
    return result
