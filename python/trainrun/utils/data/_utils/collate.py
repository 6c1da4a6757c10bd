"""default_collate: a list of samples to one batch, as PyTorch's (torch.utils.data._utils.collate).

`collate(batch, collate_fn_map=...)` looks each sample's type up in the map (exact type first, then the first
key it is an instance of) and otherwise recurses into mappings, named tuples and sequences field by field.
default_collate uses default_collate_fn_map: tensors are stacked along a new dim 0, NumPy arrays and numbers
become tensors (Python floats as float64, ints as int64, bools as bool), strings stay a list. A script extends
it by passing its own map: `collate(batch, collate_fn_map={MyType: fn, **default_collate_fn_map})`."""
import collections.abc
import copy

import numpy as np

import trainrun

_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def collate(batch, *, collate_fn_map=None):
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type, fn in collate_fn_map.items():
            if isinstance(elem, collate_type):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)  # (keeps a defaultdict's factory, an OrderedDict's order, ...)
                clone.update(collated)
                return clone
            return elem_type(collated)
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [collate(list(samples), collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return columns  # tuples come back as lists, as in PyTorch
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, column in enumerate(columns):
                    clone[i] = column
                return clone
            return elem_type(columns)
        except TypeError:
            return columns
    raise TypeError(_ERROR.format(elem_type))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return trainrun.stack(list(batch), 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    if batch[0].dtype.kind in "SaUO":
        raise TypeError(_ERROR.format(f"numpy dtype {batch[0].dtype}"))
    return trainrun.stack([trainrun.from_numpy(np.require(b, requirements="C")) for b in batch], 0)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return trainrun.tensor(np.array(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    return trainrun.tensor(list(batch), dtype=trainrun.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    if isinstance(batch[0], bool):
        return trainrun.tensor(list(batch), dtype=trainrun.bool)
    return trainrun.tensor(list(batch), dtype=trainrun.int64)


def collate_str_fn(batch, *, collate_fn_map=None):
    return list(batch)


default_collate_fn_map = {
    trainrun.Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    return collate(batch, collate_fn_map=default_collate_fn_map)


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
