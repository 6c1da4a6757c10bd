"""Training parity with PyTorch 1.13 (the peer): the same MLP (784-style
Linear -> GELU -> Linear) with the same weights and batch, trained for a few
AdamW steps on cross-entropy in both. Losses, first-step gradients and final
weights must match to float32 tolerance. Weights travel through safetensors
(written here by a minimal independent writer). Skips with a reason when
torch or the built binary is missing."""
import json
import pathlib
import struct
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no peer to compare with")

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = ROOT / "bazel-bin" / "tests" / "nn" / "mlp_parity"
DTYPES = {torch.float32: ("F32", np.float32), torch.int64: ("I64", np.int64)}


def write_safetensors(tensors, path):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        code, np_dtype = DTYPES[t.dtype]
        raw = t.detach().contiguous().numpy().astype(np_dtype).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def read_safetensors(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        assert info["dtype"] == "F32", (name, info["dtype"])
        arr = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=np.float32).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


@pytest.mark.parametrize("steps", [3])
def test_mlp_adamw_matches_pytorch(tmp_path, steps):
    if not BINARY.exists():
        pytest.skip(f"{BINARY.relative_to(ROOT)} is not built (run bazel build //...)")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.GELU(), torch.nn.Linear(32, 5))
    x, target = torch.randn(16, 20), torch.randint(0, 5, (16,))
    inputs = {k: v.detach().clone() for k, v in net.state_dict().items()}
    inputs.update(x=x, target=target)
    write_safetensors(inputs, tmp_path / "in.safetensors")
    r = subprocess.run([str(BINARY), str(tmp_path / "in.safetensors"), str(tmp_path / "out.safetensors"), str(steps)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ours = read_safetensors(tmp_path / "out.safetensors")

    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.01)
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), target)
        loss.backward()
        assert abs(ours[f"loss.{step}"].item() - loss.item()) < 1e-5, (step, ours[f"loss.{step}"].item(), loss.item())
        if step == 0:
            for name, p in net.named_parameters():
                torch.testing.assert_close(ours[f"grad.{name}"], p.grad, rtol=1e-4, atol=1e-6)
        opt.step()
    for name, p in net.state_dict().items():
        torch.testing.assert_close(ours[f"param.{name}"], p, rtol=1e-4, atol=1e-6)
