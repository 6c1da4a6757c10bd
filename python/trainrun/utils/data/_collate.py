"""default_collate: a list of samples to one batch, as PyTorch's.

Tensors are stacked (along a new dim 0), NumPy arrays and numbers become
tensors (Python floats as float64, ints as int64, bools as bool), strings
stay a list, and mappings, named tuples and sequences are collated field by
field."""
import collections.abc
import numbers

import numpy as np

import trainrun


def default_collate(batch):
    elem = batch[0]
    if isinstance(elem, trainrun.Tensor):
        return trainrun.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "SaUO":
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                            f"found numpy dtype {elem.dtype}")
        return trainrun.stack([trainrun.from_numpy(np.require(b, requirements="C")) for b in batch], 0)
    if isinstance(elem, np.generic):
        return trainrun.tensor(np.array(batch))
    if isinstance(elem, bool):
        return trainrun.tensor(list(batch), dtype=trainrun.bool)
    if isinstance(elem, int):
        return trainrun.tensor(list(batch), dtype=trainrun.int64)
    if isinstance(elem, float):
        return trainrun.tensor(list(batch), dtype=trainrun.float64)
    if isinstance(elem, numbers.Number):
        return trainrun.tensor(list(batch))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        # A list per position; tuples too come back as lists, as in PyTorch.
        return [default_collate(list(samples)) for samples in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(elem).__name__}")


def default_convert(data):
    """What DataLoader does to samples when batching is off: NumPy arrays to tensors."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "SaUO":
        return trainrun.from_numpy(data)
    if isinstance(data, collections.abc.Mapping):
        return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # PyTorch turns a plain tuple into a list here
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data
