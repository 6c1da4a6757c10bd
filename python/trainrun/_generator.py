"""trainrun.Generator and trainrun.randperm: PyTorch's CPU generator for
permutations. A Generator is the Mersenne Twister (mt19937) PyTorch's CPU
generator is, seeded the same way, and randperm draws from it exactly as
PyTorch's CPU randperm does (a Fisher-Yates pass taking one 32-bit draw per
position). So `torch.Generator().manual_seed(s)` and `trainrun.Generator().
manual_seed(s)` give the same permutations, the same shuffles from
DataLoader/RandomSampler/random_split and the same DistributedSampler
indices. Tensor random ops (rand, randn, dropout, ...) use trainrun's own
Philox generator, seeded by trainrun.manual_seed; a Generator drives
permutations and sampling only."""
import random as _random

import numpy as np

from trainrun import _C

_DEFAULT_SEED = 67280421310721  # what torch.Generator() starts from
_STATE_BYTES = 8 + 624 * 4 + 8 + 8  # get_state's tensor: seed, mt19937 words, position and flag, cached Gaussian


class Generator:
    """A CPU random generator with PyTorch's seeding and draw order."""

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise ValueError(f"Generator: only device='cpu' is supported, got {device!r}")
        self.device = _C.device("cpu")
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed):
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"manual_seed expected an int, got {type(seed).__name__}")
        self._seed = int(seed) % (1 << 64)
        # mt19937 keeps the low 32 bits of the seed, as PyTorch's CPU generator does.
        self._state = np.random.RandomState(self._seed & 0xFFFFFFFF)
        return self

    @property
    def _engine(self):
        """The mt19937 engine every draw from this generator reads. It draws in Python, which a compiled call's
        recording cannot replay (a replay would repeat the recorded values): reading it while a call records
        breaks the recording, so that call runs eagerly and draws anew each time."""
        if _C._capture_active():
            _C._note_graph_break("a draw from a trainrun.Generator (randperm, or a generator= argument) runs in "
                                 "Python, which a replay would not repeat")
        return self._state

    def initial_seed(self):
        return self._seed

    def seed(self):
        """Seeds from the operating system's entropy; returns the seed."""
        s = _random.SystemRandom().getrandbits(63)
        self.manual_seed(s)
        return s

    def get_state(self):
        """The generator's state as a uint8 tensor, as PyTorch's ByteTensor (its layout is trainrun's: the seed,
        then the mt19937 engine's 624 words, position and cached Gaussian); set_state takes it back."""
        _, keys, pos, has_gauss, gauss = self._state.get_state()
        parts = [np.array([self._seed], dtype=np.uint64).view(np.uint8), np.asarray(keys, dtype=np.uint32).view(
            np.uint8), np.array([pos, has_gauss], dtype=np.int32).view(np.uint8),
            np.array([gauss], dtype=np.float64).view(np.uint8)]
        return _C.from_numpy(np.concatenate(parts))

    def set_state(self, new_state):
        if isinstance(new_state, tuple):  # (the form earlier trainrun versions gave)
            self._seed, engine_state = new_state
        else:
            data = np.asarray(new_state.detach().cpu().numpy() if hasattr(new_state, "numpy") else new_state,
                              dtype=np.uint8)
            if data.ndim != 1 or data.size != _STATE_BYTES:
                raise RuntimeError(f"Generator.set_state: expected a uint8 tensor of {_STATE_BYTES} bytes "
                                   f"(what get_state gives), got {list(data.shape)}")
            self._seed = int(data[:8].view(np.uint64)[0])
            keys = data[8:8 + 624 * 4].view(np.uint32)
            pos, has_gauss = data[8 + 624 * 4:16 + 624 * 4].view(np.int32)
            gauss = float(data[16 + 624 * 4:].view(np.float64)[0])
            engine_state = ("MT19937", keys.copy(), int(pos), int(has_gauss), gauss)
        self._state = np.random.RandomState()
        self._state.set_state(engine_state)
        return self

    def _random32(self, count):
        """The next `count` 32-bit outputs of the engine, as Python ints."""
        if count <= 0:
            return []
        return self._engine.randint(0, 1 << 32, size=count, dtype=np.uint64).tolist()

    def _random63(self):
        """A non-negative 63-bit draw: PyTorch's int64 random_() (two 32-bit outputs, high first)."""
        hi, lo = self._random32(2)
        return ((hi << 32) | lo) % (1 << 63)


default_generator = Generator()


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1 (trainrun.int64 unless dtype says otherwise)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"randperm(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise ValueError(f"randperm(): n must be non-negative, got {n}")
    g = default_generator if generator is None else generator
    if not isinstance(g, Generator):
        raise TypeError(f"randperm(): generator must be a trainrun.Generator, not {type(g).__name__}")
    order = _permutation(int(n), g)
    out = _C.from_numpy(np.asarray(order, dtype=np.int64))
    if dtype is not None:
        out = out.to(dtype)
    if device is not None:
        out = out.to(device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _permutation(n, generator):
    """PyTorch's CPU randperm: for i in 0..n-2 swap i with i + draw % (n - i)."""
    order = list(range(n))
    draws = generator._random32(n - 1)
    for i, z in enumerate(draws):
        j = i + z % (n - i)
        order[i], order[j] = order[j], order[i]
    return order
