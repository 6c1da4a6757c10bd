"""The modules' state version: a count that moves on every change to a module's attributes, training flags or
hooks. trainrun.compile's guards on the Python values a recording baked in (trainrun/_compile_guards.py) are read
again only when it moved."""
import itertools

from trainrun import _C

_state_changes = itertools.count(1)
_state = [0]


def state_version():
    return _state[0]


def _state_changed(module=None, name=None):
    _state[0] = next(_state_changes)
    if module is not None and _C._capture_active():  # a side effect a replay would not repeat: record no replay
        _C._note_graph_break(f"{type(module).__name__}.{name} was assigned during the call (a replay would not "
                             "assign it)")
