"""trainrun.random: the default generator's seed and state, as torch.random.

The default generator has PyTorch's two engines: the Mersenne Twister behind
CPU draws (its state is get_rng_state(), in PyTorch's layout, so a state
saved by torch.get_rng_state() restores here and the other way) and the
counters behind CUDA draws (trainrun.cuda.get_rng_state())."""
import contextlib
import os
import struct

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
    """The CPU engine's state as a uint8 tensor of PyTorch's layout (for set_rng_state, here or in PyTorch)."""
    return default_generator.get_state()


def set_rng_state(new_state):
    if _C._capture_active():  # (a replay would not restore the state: the call runs eagerly)
        _C._note_graph_break("set_rng_state() was called (a replay would draw on without restoring the state)")
    default_generator.set_state(new_state)


def _counter_state():
    """The CUDA draws' (seed, offset) as a uint8 tensor (trainrun.cuda.get_rng_state)."""
    import numpy as np
    seed_value, offset = default_generator._cpp.philox_state()
    return _C.from_numpy(np.frombuffer(struct.pack("<QQ", seed_value, offset), dtype=np.uint8).copy())


def _set_counter_state(new_state):
    data = bytes(new_state.detach().cpu().numpy().tobytes()) if hasattr(new_state, "numpy") else bytes(new_state)
    if len(data) != 16:
        raise RuntimeError(f"set_rng_state: expected the 16 bytes trainrun.cuda.get_rng_state() gives, got "
                           f"{len(data)}")
    default_generator._cpp.set_philox_state(*struct.unpack("<QQ", data))


def _all_states():
    """Both engines' states: what fork_rng and checkpoint recomputation restore."""
    return get_rng_state(), _counter_state()


def _set_all_states(states):
    set_rng_state(states[0])
    _set_counter_state(states[1])


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type="cuda"):
    """Restores the generators' state on exit: random draws inside do not change what comes after."""
    if not enabled:
        yield
        return
    saved = _all_states()
    try:
        yield
    finally:
        _set_all_states(saved)
