"""Training parity with PyTorch 1.13 (the peer): the same model with the
same weights and batch, trained for a few AdamW steps in both: an MLP
(Linear -> GELU -> Linear, cross-entropy), a small CNN (Conv2d, BatchNorm2d
in training mode, max and average pooling, grouped convolution, Linear) and a
pre-norm transformer block (causal self-attention + GELU MLP, MSE). Losses, first-step gradients and
final weights must match to float32 tolerance. Weights travel through
safetensors (tests/python/safetensors_io.py, independent of trainrun's
reader). Skips with a reason when torch or the built binary is missing."""
import pathlib
import subprocess

import pytest

torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no peer to compare with")
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402  (needs torch)

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = ROOT / "bazel-bin" / "tests" / "nn" / "train_parity"


class Block(torch.nn.Module):
    """The same pre-norm block as trainrun's nn::TransformerBlock, same parameter names."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.Module()
        self.attn.qkv = torch.nn.Linear(d, 3 * d)
        self.attn.proj = torch.nn.Linear(d, d)
        self.ln_2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def attention(self, x):
        b, t, c = x.shape
        hd = c // self.heads
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in self.attn.qkv(x).split(c, dim=2))
        scores = (q @ k.transpose(-2, -1)) / hd ** 0.5
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        y = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        return self.attn.proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def run_both(tmp_path, model, optimizer, net, x, target, loss_fn, steps, extra=None):
    if not BINARY.exists():
        pytest.skip(f"{BINARY.relative_to(ROOT)} is not built (run bazel build //...)")
    inputs = {k: v.detach().clone() for k, v in net.state_dict().items()}
    inputs.update(x=x, target=target, **(extra or {}))
    write_safetensors(inputs, tmp_path / "in.safetensors")
    r = subprocess.run([str(BINARY), model, optimizer, str(tmp_path / "in.safetensors"),
                        str(tmp_path / "out.safetensors"), str(steps)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    ours = read_safetensors(tmp_path / "out.safetensors")
    if optimizer == "adamw":
        opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.01)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        opt.zero_grad()
        loss = loss_fn(net(x), target)
        loss.backward()
        assert abs(ours[f"loss.{step}"].item() - loss.item()) < 1e-5 * max(1.0, abs(loss.item())), \
            (step, ours[f"loss.{step}"].item(), loss.item())
        if step == 0:
            for name, p in net.named_parameters():
                torch.testing.assert_close(ours[f"grad.{name}"], p.grad, rtol=1e-4, atol=1e-5, msg=name)
        opt.step()
    for name, p in net.state_dict().items():
        torch.testing.assert_close(ours[f"param.{name}"], p, rtol=1e-4, atol=1e-5, msg=name)


def test_mlp_adamw_matches_pytorch(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.GELU(), torch.nn.Linear(32, 5))
    run_both(tmp_path, "mlp", "adamw", net, torch.randn(16, 20), torch.randint(0, 5, (16,)),
             torch.nn.functional.cross_entropy, steps=3)


def test_transformer_block_sgd_matches_pytorch(tmp_path):
    # SGD, not Adam: attention's key bias has a gradient that is zero up to
    # rounding, and Adam divides such noise by its own size, so two correct
    # implementations drift apart in exactly those entries.
    torch.manual_seed(1)
    net = Block(32, 4)
    run_both(tmp_path, "block", "sgd", net, torch.randn(2, 10, 32), torch.randn(2, 10, 32), torch.nn.functional.mse_loss,
             steps=2, extra={"num_heads": torch.tensor(4)})


def test_cnn_adamw_matches_pytorch(tmp_path):
    # The first convolution has no bias, as usual before BatchNorm: BatchNorm
    # subtracts it again, so its gradient is rounding noise (see above).
    torch.manual_seed(2)
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3, padding=1, groups=2), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                        nn.Linear(16 * 3 * 3, 10))
    run_both(tmp_path, "cnn", "adamw", net, torch.randn(4, 3, 12, 12), torch.randint(0, 10, (4,)),
             torch.nn.functional.cross_entropy, steps=3)
