"""A minimal safetensors reader and writer, independent of trainrun's C++
one, so that the Python tests also check trainrun's files against the
format (8-byte little-endian header length, JSON header, raw data)."""
import json
import struct

import numpy as np
import torch

NP_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64,
             "I32": np.int32, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
TORCH_TO_CODE = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.int64: "I64",
                 torch.int32: "I32", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def read_safetensors(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = body[begin:end]
        if info["dtype"] == "BF16":
            words = np.frombuffer(raw, dtype=np.uint16).astype(np.int32) << 16
            t = torch.from_numpy(words.view(np.float32).copy()).to(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(raw, dtype=NP_DTYPES[info["dtype"]]).copy())
        out[name] = t.reshape(info["shape"])
    return out


def write_safetensors(tensors, path):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        code = TORCH_TO_CODE[t.dtype]
        raw = t.detach().contiguous().numpy().astype(NP_DTYPES[code]).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))
