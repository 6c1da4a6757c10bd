"""CyclingIterator, as PyTorch's: the items of generator_fn(epoch) for epoch = start_epoch, ..., n - 1, one
iterator after the other (a training loop's epochs unrolled into one)."""


class CyclingIterator:
    def __init__(self, n, generator_fn, start_epoch=0):
        self._n, self._epoch, self._generator_fn = n, start_epoch, generator_fn
        self._iter = generator_fn(start_epoch)

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            try:
                return next(self._iter)
            except StopIteration:
                if self._epoch >= self._n - 1:
                    raise
                self._epoch += 1
                self._iter = self._generator_fn(self._epoch)
