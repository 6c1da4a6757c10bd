"""trainrun.nn.utils.rnn: batching sequences of different lengths, as PyTorch's: pad_sequence stacks them
into one padded tensor; pack_padded_sequence / pack_sequence make a PackedSequence (the steps' rows
concatenated, longest sequences first, with batch_sizes per step), which the recurrent layers take (each
sequence stops at its own length) and pad_packed_sequence undoes."""
import collections

import trainrun
from trainrun import _C


class PackedSequence(collections.namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices",
                                                               "unsorted_indices"])):
    """data: (sum of lengths, *) rows, step by step; batch_sizes: how many sequences are still running at
    each step (int64, on the CPU); sorted_indices: the batch order by decreasing length (None when the
    batch was sorted already), unsorted_indices its inverse."""

    def to(self, *args, **kwargs):
        return type(self)(self.data.to(*args, **kwargs), self.batch_sizes, self.sorted_indices,
                          self.unsorted_indices)

    def float(self):
        return self.to(_C.dtype.float32)

    def double(self):
        return self.to(_C.dtype.float64)

    def cpu(self):
        return self.to("cpu")

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _as_list(lengths):
    return [int(n) for n in (lengths.tolist() if hasattr(lengths, "tolist") else lengths)]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):  # noqa: A002
    lengths = _as_list(lengths)
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
        order = list(range(len(lengths)))
    else:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        sorted_indices = trainrun.tensor(order, dtype=trainrun.int64)
    if any(n <= 0 for n in lengths):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    x = input.transpose(0, 1) if batch_first else input  # (T, B, *)
    if sorted_indices is not None:
        x = x.index_select(1, sorted_indices.to(x.device))
    ordered = [lengths[i] for i in order]
    steps = ordered[0]
    if steps > x.shape[0]:
        raise RuntimeError(f"pack_padded_sequence: a length ({steps}) is longer than the input ({x.shape[0]} steps)")
    batch_sizes = [sum(1 for n in ordered if n > t) for t in range(steps)]
    data = _C.cat([x[t, :b] for t, b in enumerate(batch_sizes)], 0)
    unsorted = None if sorted_indices is None else trainrun.argsort(sorted_indices)
    return PackedSequence(data, trainrun.tensor(batch_sizes, dtype=trainrun.int64), sorted_indices, unsorted)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded (T, B, *) or (B, T, *), lengths) in the batch's original order."""
    data, batch_sizes = sequence.data, _as_list(sequence.batch_sizes)
    batch, steps = batch_sizes[0], len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps_out = total_length
    else:
        steps_out = steps
    rows, offset = [], 0
    trailing = list(data.shape[1:])
    for b in batch_sizes:
        step = data[offset:offset + b]
        offset += b
        if b < batch:
            step = _C.cat([step, data.new_full([batch - b] + trailing, padding_value)], 0)
        rows.append(step)
    rows += [data.new_full([batch] + trailing, padding_value)] * (steps_out - steps)
    padded = _C.stack(rows, 0)  # (T, B, *) in sorted order
    lengths = [sum(1 for b in batch_sizes if b > i) for i in range(batch)]
    lengths = trainrun.tensor(lengths, dtype=trainrun.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices.to(padded.device))
        lengths = lengths.index_select(0, sequence.unsorted_indices)
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pack_sequence(sequences, enforce_sorted=True):
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Tensors of shape (L_i, *) to one (max L, B, *) tensor, or (B, max L, *) with batch_first."""
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("right", "left"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    trailing = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: every sequence must have the trailing shape {trailing}, got "
                               f"{tuple(s.shape[1:])}")
    longest = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        pad = s.new_full((longest - s.shape[0], *trailing), padding_value)
        rows.append(_C.cat([s, pad] if padding_side == "right" else [pad, s], 0))
    return _C.stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    padded = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [padded[i, :int(n)] for i, n in enumerate(lengths.tolist() if hasattr(lengths, "tolist") else lengths)]


def unpack_sequence(packed_sequences):
    """The list of sequences a PackedSequence holds (the inverse of pack_sequence)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def invert_permutation(permutation):
    """The permutation that undoes `permutation` (None stays None)."""
    if permutation is None:
        return None
    output = _C.zeros(list(permutation.shape), dtype=permutation.dtype)
    return output.scatter(0, permutation, _C.arange(permutation.numel(), dtype=permutation.dtype))
