"""A rank's data file: the bytes of the tensor pieces it writes, in the
safetensors layout (8-byte header length, JSON header, then the data), so
that safetensors tools can read every piece; the checkpoint's metadata points
into it by byte offset, and checks each piece with a CRC-32C (computed in C++
with the CPU's crc32 instruction). Writes go from the tensors through NumPy
views (one copy, the kernel's); loads check every piece, then read them into
the tensors (PieceReader)."""
import json
import os
import struct

import numpy as np

from trainrun import _C

_SAFETENSORS_DTYPES = {"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
                       "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def dtype_name(dtype):
    return str(dtype).split(".")[-1]


def tensor_bytes(t):
    """The tensor's elements as a flat byte view (little-endian, row-major), without copying a contiguous
    CPU tensor."""
    t = t.detach().cpu().contiguous()  # (a CUDA tensor's bytes are read on the host)
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


class PieceReader:
    """The saved pieces one load needs, read in two passes so that a bad file loads nothing and the disk is
    read once, at its sequential rate:
      1. verify(): every piece streamed through a small buffer (large sequential reads the kernel reads ahead
         of), its CRC-32C checked as it comes; a missing or truncated file, a wrong size or checksum raises
         here, before any tensor is touched;
      2. read_into(): the same bytes again, now from the page cache, straight into the destination tensor
         when the piece fills a contiguous region of it, else into a piece-sized buffer to copy from. A file
         replaced between the passes (another inode, size or time) is refused rather than loaded."""

    BUFFER = 8 << 20

    def __init__(self, folder):
        self.folder, self.fds, self.identity = folder, {}, {}

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def _fd(self, name):
        if name not in self.fds:
            path = os.path.join(self.folder, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                raise ValueError(f"checkpoint '{self.folder}': data file {name} is missing") from None
            st = os.fstat(fd)
            self.fds[name], self.identity[name] = fd, (st.st_ino, st.st_size, st.st_mtime_ns)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        return self.fds[name]

    def verify(self, chunks):
        """chunks: [(chunk, dtype name)], each saved piece once. Checks each one's file, range, size and CRC."""
        buffer = memoryview(bytearray(self.BUFFER))
        for chunk, dtype in sorted(chunks, key=lambda c: (c[0].file, c[0].byte_offset)):
            fd = self._fd(chunk.file)
            size, end = self.identity[chunk.file][1], chunk.byte_offset + chunk.byte_length
            if size < end:
                raise ValueError(f"checkpoint '{self.folder}': data file {chunk.file} is truncated ({size} bytes, a "
                                 f"piece ends at byte {end})")
            shape = list(chunk.sizes)
            expected = empty_piece(dtype, [0]).itemsize * int(np.prod(shape, dtype=np.int64))
            if chunk.byte_length != expected:
                raise ValueError(f"checkpoint '{self.folder}': a piece of {chunk.file} is {chunk.byte_length} "
                                 f"bytes, its {dtype} {shape} needs {expected}")
            crc, at = 0, chunk.byte_offset
            while at < end:
                n = os.preadv(fd, [buffer[:min(self.BUFFER, end - at)]], at)
                if n <= 0:
                    raise ValueError(f"checkpoint '{self.folder}': data file {chunk.file} ended at byte {at} while "
                                     f"reading a piece that ends at {end}")
                crc = _C._crc32c(buffer[:n], crc)
                at += n
            if crc != chunk.crc32c:
                raise ValueError(f"checkpoint '{self.folder}': data file {chunk.file} is corrupted (CRC-32C mismatch "
                                 f"in bytes {chunk.byte_offset}..{end})")

    def check_unchanged(self, name=None):
        """Refuses a data file written in place since verify() (a save over the folder cannot do that: it
        renames a new folder in, and the files open here stay the ones checked)."""
        for file in [name] if name is not None else list(self.fds):
            st = os.fstat(self.fds[file])
            if (st.st_ino, st.st_size, st.st_mtime_ns) != self.identity[file]:
                raise ValueError(f"checkpoint '{self.folder}': data file {file} changed while it was loaded")

    def _read_exactly(self, chunk, target):
        """Reads the verified piece's bytes into `target` (a writable buffer of its length)."""
        fd = self.fds[chunk.file]
        self.check_unchanged(chunk.file)
        view, at, end = memoryview(target).cast("B"), chunk.byte_offset, chunk.byte_offset + chunk.byte_length
        while at < end:
            n = os.preadv(fd, [view[at - chunk.byte_offset:]], at)
            if n <= 0:
                raise ValueError(f"checkpoint '{self.folder}': data file {chunk.file} shrank while it was loaded")
            at += n

    def read_piece(self, chunk, dtype):
        """A verified piece as a tensor of its own (bfloat16: converted)."""
        array = empty_piece(dtype, list(chunk.sizes))
        self._read_exactly(chunk, array)
        return tensor_of_piece(array, dtype)

    def read_into(self, chunk, dtype, destination):
        """Reads a verified piece straight into `destination` (a contiguous CPU tensor of the piece's shape and
        dtype) when its bytes can go there as they are; False when they cannot (then read_piece and copy)."""
        if dtype == "bfloat16" or not destination.is_contiguous() or destination.device.type != "cpu":
            return False
        self._read_exactly(chunk, destination.detach().numpy().reshape(-1))
        return True
