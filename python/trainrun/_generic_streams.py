"""torch.Stream and torch.Event (PyTorch 2.5+): device-generic streams and events for device-agnostic code
(`torch.Stream(device)`, `stream.record_event()`, `event.wait(stream)`). A CUDA one holds trainrun.cuda's stream
or event and forwards to it; a CPU one is trainrun.cpu's (work runs in program order: queries answer done, waits
have nothing to wait for; a CPU stream records no events, as PyTorch's refuses)."""
import trainrun

_DEVICE_TYPES = {"cpu": 0, "cuda": 1}


def _device(device):
    if device is None:
        return trainrun.device("cuda") if trainrun.cuda.is_available() else trainrun.device("cpu")
    return device if isinstance(device, trainrun.device) else trainrun.device(device)


class Stream:
    def __init__(self, device=None, *, priority=0, **kwargs):
        self.device = _device(device)
        if self.device.type not in _DEVICE_TYPES:
            raise RuntimeError(f"torch.Stream: no streams on device type {self.device.type!r}")
        self._cuda = trainrun.cuda.Stream(self.device, priority) if self.device.type == "cuda" else None

    @property
    def device_type(self):
        return _DEVICE_TYPES[self.device.type]

    @property
    def device_index(self):
        return self.device.index if self.device.index is not None else (0 if self._cuda is not None else -1)

    @property
    def stream_id(self):
        return self._cuda.cuda_stream if self._cuda is not None else 0

    def query(self):
        return self._cuda.query() if self._cuda is not None else True

    def synchronize(self):
        if self._cuda is not None:
            self._cuda.synchronize()

    def wait_event(self, event):
        if self._cuda is not None and event._cuda is not None:
            self._cuda.wait_event(event._cuda)

    def wait_stream(self, stream):
        if self._cuda is not None and stream._cuda is not None:
            self._cuda.wait_stream(stream._cuda)

    def record_event(self, event=None):
        if self._cuda is None:
            raise RuntimeError(f"{self.device.type} backend doesn't support events.")
        event = event if event is not None else Event(self.device)
        event.record(self)
        return event

    def __repr__(self):
        return (f"torch.Stream device_type={self.device.type}, device_index={self.device_index}, "
                f"stream_id={self.stream_id}")


class Event:
    def __init__(self, device=None, *, enable_timing=False, blocking=False, interprocess=False):
        self.device = _device(device)
        self._cuda = (trainrun.cuda.Event(enable_timing=enable_timing, blocking=blocking)
                      if self.device.type == "cuda" else None)

    def record(self, stream=None):
        if self._cuda is not None:  # (None: the current stream)
            self._cuda.record(stream._cuda if isinstance(stream, Stream) else stream)

    def query(self):
        return self._cuda.query() if self._cuda is not None else True

    def synchronize(self):
        if self._cuda is not None:
            self._cuda.synchronize()

    def wait(self, stream=None):
        if self._cuda is not None:
            self._cuda.wait(stream._cuda if isinstance(stream, Stream) else stream)

    def elapsed_time(self, end_event):
        if self._cuda is None:
            raise RuntimeError(f"{self.device.type} backend doesn't support events timing.")
        return self._cuda.elapsed_time(end_event._cuda)

    def __repr__(self):
        index = self.device.index if self.device.index is not None else (0 if self._cuda is not None else -1)
        return f"torch.Event device_type={self.device.type}, device_index={index}, event_flag=1, event_id=0"
