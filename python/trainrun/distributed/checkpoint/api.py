"""torch.distributed.checkpoint.api: CheckpointException, what a failed save or load raises when it gathers the
ranks' failures (trainrun raises the failing rank's own error, with its message; this class is for `except`)."""


class CheckpointException(BaseException):
    def __init__(self, msg, failures):
        super().__init__(msg, failures)
        self._failures = failures

    @property
    def failures(self):
        return self._failures
