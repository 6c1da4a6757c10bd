"""trainrun.random: the default generators' seed and state, as torch.random.

The state covers both of trainrun's default generators: the counter-based
one behind random ops (rand, randn, dropout, multinomial) and the Mersenne
Twister that reproduces PyTorch's permutations and shuffles."""
import contextlib
import os
import pickle

import numpy as np

from trainrun import _C
from trainrun._generator import default_generator


def manual_seed(seed):
    import trainrun
    return trainrun.manual_seed(seed)


def seed():
    """Seeds from the operating system's entropy; returns the seed."""
    import trainrun
    s = int.from_bytes(os.urandom(8), "little") % (1 << 63)
    trainrun.manual_seed(s)
    return s


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    """The default generators' state as a uint8 tensor (for set_rng_state)."""
    state = pickle.dumps((_C._rng_state(), default_generator.get_state().numpy().tobytes()))
    return _C.from_numpy(np.frombuffer(state, dtype=np.uint8).copy())


def set_rng_state(new_state):
    if _C._capture_active():  # (a replay would not restore the state: the call runs eagerly)
        _C._note_graph_break("set_rng_state() was called (a replay would draw on without restoring the state)")
    try:
        (seed_value, offset), python_state = pickle.loads(bytes(new_state.numpy().tobytes()))
    except Exception as e:  # noqa: BLE001  (anything unpickling can raise)
        raise RuntimeError(f"set_rng_state: not a state from trainrun.get_rng_state() ({e})") from None
    _C._set_rng_state(seed_value, offset)
    if isinstance(python_state, bytes):
        python_state = np.frombuffer(python_state, dtype=np.uint8)
    default_generator.set_state(python_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type="cuda"):
    """Restores the generators' state on exit: random draws inside do not change what comes after."""
    if not enabled:
        yield
        return
    saved = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(saved)
