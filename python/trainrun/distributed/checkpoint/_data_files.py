"""A rank's data file: the bytes of the tensor pieces it writes, in the
safetensors layout (8-byte header length, JSON header, then the data), so
that safetensors tools can read every piece; the checkpoint's metadata points
into it by byte offset, and checks each piece with a CRC-32C (computed in C++
with the CPU's crc32 instruction). Writes go from the tensors through NumPy
views (one copy, the kernel's); loads map the files and check and copy the
pieces straight from the page cache."""
import json
import mmap
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


class MappedFiles:
    """The data files of one load, each mapped once: a piece is checked and copied straight from the page
    cache, with no read() into a buffer first (one pass over the bytes fewer)."""

    def __init__(self, folder):
        self.folder, self.maps = folder, {}

    def bytes_of(self, chunk):
        """The piece's bytes (a memoryview into the mapping), the file's existence and size checked."""
        if chunk.file not in self.maps:
            path = os.path.join(self.folder, chunk.file)
            if not os.path.exists(path):
                raise ValueError(f"checkpoint '{self.folder}': data file {chunk.file} is missing")
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                # Private and writable (copy-on-write: nothing reaches the file), because tensors are made
                # over writable memory; reading it reads the page cache.
                mapped = mmap.mmap(f.fileno(), size, flags=mmap.MAP_PRIVATE,
                                   prot=mmap.PROT_READ | mmap.PROT_WRITE) if size else bytearray()
            if size:  # read ahead the whole file at once (from disk: large requests, not page by page)
                mapped.madvise(mmap.MADV_SEQUENTIAL)
                mapped.madvise(mmap.MADV_WILLNEED)
            self.maps[chunk.file] = (mapped, size)
        mapped, size = self.maps[chunk.file]
        end = chunk.byte_offset + chunk.byte_length
        if size < end:
            raise ValueError(f"checkpoint '{self.folder}': data file {chunk.file} is truncated ({size} bytes, a "
                             f"piece ends at byte {end})")
        return memoryview(mapped)[chunk.byte_offset:end]


def read_piece(files, chunk, dtype):
    """A saved piece as a tensor over the mapped file (bfloat16: converted), checked: the file exists, holds
    the range, and the CRC-32C matches."""
    data = files.bytes_of(chunk)
    shape = list(chunk.sizes)
    expected = empty_piece(dtype, [0]).itemsize * int(np.prod(shape, dtype=np.int64))
    if len(data) != expected:
        raise ValueError(f"checkpoint '{files.folder}': a piece of {chunk.file} is {chunk.byte_length} bytes, its "
                         f"{dtype} {shape} needs {expected}")
    if checksum(data) != chunk.crc32c:
        raise ValueError(f"checkpoint '{files.folder}': data file {chunk.file} is corrupted (CRC-32C mismatch in "
                         f"bytes {chunk.byte_offset}..{chunk.byte_offset + chunk.byte_length})")
    array = np.frombuffer(data, dtype=empty_piece(dtype, [0]).dtype).reshape(shape)
    return tensor_of_piece(array, dtype)
