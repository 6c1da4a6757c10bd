"""A rank's data file: the bytes of the tensor pieces it writes, in the
safetensors layout (8-byte header length, JSON header, then the data), so
that safetensors tools can read every piece; the checkpoint's metadata points
into it by byte offset, and checks each piece with a CRC-32C (computed in C++
with the CPU's crc32 instruction). Bytes go between tensors and files through
NumPy views: one copy each way (the kernel's), none in Python."""
import json
import os
import struct

import numpy as np

from trainrun import _C

_SAFETENSORS_DTYPES = {"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
                       "int32": "I32", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def dtype_name(dtype):
    return str(dtype).split(".")[-1]


def tensor_bytes(t):
    """The tensor's elements as a flat byte view (little-endian, row-major), without copying a contiguous
    CPU tensor."""
    t = t.detach().contiguous()
    if dtype_name(t.dtype) == "bfloat16":  # bfloat16 is float32's top half: exact both ways
        return memoryview((t.to(_C.dtype.float32).numpy().view(np.uint32) >> 16).astype("<u2")).cast("B")
    return memoryview(np.ascontiguousarray(t.numpy()).reshape(-1)).cast("B")


def empty_piece(dtype, shape):
    """A NumPy array to read a piece's bytes into (bfloat16 as raw 16-bit words)."""
    return np.empty(shape, dtype="<u2" if dtype == "bfloat16" else np.bool_ if dtype == "bool" else dtype)


def tensor_of_piece(array, dtype):
    """The tensor over a piece read into empty_piece's array (shared, not copied, except for bfloat16)."""
    if dtype == "bfloat16":
        return _C.from_numpy((array.astype(np.uint32) << 16).view(np.float32)).to(_C.dtype.bfloat16)
    return _C.from_numpy(array)


def checksum(data):
    return _C._crc32c(data)


def write_data_file(path, pieces):
    """pieces: [(name, dtype name, shape, bytes)]. Writes, fsyncs, and returns [(byte_offset, length, crc32c)]."""
    header, offset = {}, 0
    for name, dtype, shape, data in pieces:
        header[name] = {"dtype": _SAFETENSORS_DTYPES[dtype], "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)  # safetensors aligns the data to 8 bytes
    start = 8 + len(header_bytes)
    locations = []
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for name, _, _, data in pieces:
            locations.append((start + header[name]["data_offsets"][0], len(data), checksum(data)))
            f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return locations


def read_piece(folder, chunk, dtype):
    """A saved piece as a tensor, checked: the file exists, holds the range, and the CRC-32C matches."""
    path = os.path.join(folder, chunk.file)
    if not os.path.exists(path):
        raise ValueError(f"checkpoint '{folder}': data file {chunk.file} is missing")
    size = os.path.getsize(path)
    end = chunk.byte_offset + chunk.byte_length
    if size < end:
        raise ValueError(f"checkpoint '{folder}': data file {chunk.file} is truncated ({size} bytes, a piece "
                         f"ends at byte {end})")
    array = empty_piece(dtype, list(chunk.sizes))
    data = memoryview(array.reshape(-1)).cast("B")
    if len(data) != chunk.byte_length:
        raise ValueError(f"checkpoint '{folder}': a piece of {chunk.file} is {chunk.byte_length} bytes, its "
                         f"{dtype} {list(chunk.sizes)} needs {len(data)}")
    with open(path, "rb") as f:
        f.seek(chunk.byte_offset)
        if f.readinto(data) != chunk.byte_length:
            raise ValueError(f"checkpoint '{folder}': data file {chunk.file} ended inside a piece")
    if checksum(data) != chunk.crc32c:
        raise ValueError(f"checkpoint '{folder}': data file {chunk.file} is corrupted (CRC-32C mismatch in bytes "
                         f"{chunk.byte_offset}..{end})")
    return tensor_of_piece(array, dtype)
