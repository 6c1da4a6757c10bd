"""A rank's data file: the bytes of the tensor pieces it writes, in the
safetensors layout (8-byte header length, JSON header, then the data), so
that safetensors tools can read every piece; the checkpoint's metadata points
into it by byte offset, and checks each piece with a CRC-32."""
import json
import os
import struct
import zlib

import numpy as np

from trainrun import _C

_SAFETENSORS_DTYPES = {"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
                       "int32": "I32", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def dtype_name(dtype):
    return str(dtype).split(".")[-1]


def tensor_bytes(t):
    """The tensor's elements as little-endian bytes in row-major order."""
    t = t.detach().contiguous()
    if dtype_name(t.dtype) == "bfloat16":  # bfloat16 is float32's top half: exact both ways
        return (t.to(_C.dtype.float32).numpy().view(np.uint32) >> 16).astype("<u2").tobytes()
    return np.ascontiguousarray(t.numpy()).tobytes()


def tensor_from_bytes(data, dtype, shape):
    if dtype == "bfloat16":
        bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
        return _C.from_numpy(bits.view(np.float32).reshape(shape)).to(_C.dtype.bfloat16)
    array = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<") if dtype != "bool" else np.bool_)
    return _C.from_numpy(array.reshape(shape).copy())


def write_data_file(path, pieces):
    """pieces: [(name, dtype name, shape, bytes)]. Writes, fsyncs, and returns [(byte_offset, length, crc32)]."""
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
            locations.append((start + header[name]["data_offsets"][0], len(data), zlib.crc32(data)))
            f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return locations


def read_piece(folder, chunk):
    """A saved piece's bytes, checked: the file exists, holds the range, and the CRC-32 matches."""
    path = os.path.join(folder, chunk.file)
    if not os.path.exists(path):
        raise ValueError(f"checkpoint '{folder}': data file {chunk.file} is missing")
    size = os.path.getsize(path)
    end = chunk.byte_offset + chunk.byte_length
    if size < end:
        raise ValueError(f"checkpoint '{folder}': data file {chunk.file} is truncated ({size} bytes, a piece "
                         f"ends at byte {end})")
    with open(path, "rb") as f:
        f.seek(chunk.byte_offset)
        data = f.read(chunk.byte_length)
    if zlib.crc32(data) != chunk.crc32:
        raise ValueError(f"checkpoint '{folder}': data file {chunk.file} is corrupted (CRC-32 mismatch in bytes "
                         f"{chunk.byte_offset}..{end})")
    return data
