"""trainrun.Size: a tensor's shape, a tuple of ints (as torch.Size)."""
import math


class Size(tuple):
    def numel(self):
        return math.prod(self)

    def __repr__(self):
        return f"trainrun.Size({list(self)})"

    def __getitem__(self, index):
        item = super().__getitem__(index)
        return Size(item) if isinstance(index, slice) else item
