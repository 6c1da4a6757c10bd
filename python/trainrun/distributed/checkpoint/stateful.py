"""Stateful: anything with state_dict() and load_state_dict() that a checkpoint saves and restores."""


class Stateful:
    def state_dict(self):
        raise NotImplementedError

    def load_state_dict(self, state_dict):
        raise NotImplementedError
