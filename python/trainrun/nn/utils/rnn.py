"""trainrun.nn.utils.rnn: batching sequences of different lengths.

pad_sequence stacks them into one padded tensor (what the recurrent layers
here take); pack_padded_sequence and PackedSequence are not provided: pass
the padded batch and mask by length."""
from trainrun import _C


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
