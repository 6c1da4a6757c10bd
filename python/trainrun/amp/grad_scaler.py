"""GradScaler: loss scaling for float16 training, as torch.amp.GradScaler.

scale(loss) multiplies the loss by the scale so small float16 gradients do
not flush to zero; step(optimizer) divides the gradients back (unscale_, if
not done already), and skips the step when any gradient is inf or NaN;
update() halves the scale after such a step and doubles it after
growth_interval good ones. enabled=False makes every method a pass-through,
so one script runs with and without it."""
import collections
import enum
import warnings

import trainrun


def _local_piece(grad):
    """A DTensor gradient's local piece (its own elements), a plain tensor itself."""
    return grad.to_local() if hasattr(grad, "to_local") else grad


class OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not isinstance(device, str):  # torch.cuda.amp.GradScaler(init_scale, ...): no device argument
            device, init_scale = "cuda", device
        self._device = device
        if enabled and device == "cuda" and not trainrun.cuda.is_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.")
            enabled = False
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        if not isinstance(growth_interval, int) or growth_interval <= 0:
            raise ValueError("growth_interval must be a positive integer")
        self._enabled = enabled
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer_states = collections.defaultdict(lambda: {"stage": OptState.READY, "found_inf": False})

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        """outputs (a tensor or nested lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        if trainrun._C._is_cpp_tensor(outputs):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer):
        """Divides optimizer's gradients by the scale in place (e.g. before clip_grad_norm_), and notes
        whether any is inf or NaN."""
        if not self._enabled:
            return
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inverse = 1.0 / self._scale
        found_inf = False
        with trainrun.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = _local_piece(p.grad)  # (a sharded gradient: this rank's piece, no communication)
                    grad.mul_(inverse)
                    if not found_inf and not bool(trainrun.isfinite(grad).all()):
                        found_inf = True
        state["found_inf"] = self._found_inf_anywhere(found_inf)
        state["stage"] = OptState.UNSCALED

    def _found_inf_anywhere(self, found_inf_here):
        """Whether any gradient the step depends on was inf or NaN (here: this process's)."""
        return found_inf_here

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(...) on unscaled gradients, skipped (returning None) if any was inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale=None):
        """The next scale: new_scale if given, else backed off after a skipped step, grown after
        growth_interval steps without one."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if trainrun._C._is_cpp_tensor(new_scale) else new_scale)
        else:
            if not self._per_optimizer_states:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(s["found_inf"] for s in self._per_optimizer_states.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer_states.clear()

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
