"""A rank of test_dtensor.py: a transformer (embedding, one block of
attention + SwiGLU MLP with RMSNorm, output projection) under the
torchtitan-style tensor-parallel plan, trained 10 AdamW steps next to the
same model in one process on the same data: losses and full gradients must
agree within 1e-5. argv: the mesh ("4": tp=4; "2x2": dp=2 x tp=2, each dp
row training the same batch), "loss_parallel" to compute the loss on
class-sharded logits, "sequence_parallel" for torchtitan's sequence-parallel
plan (norms on sequence shards), "fsdp" for FSDP x TP: fully_shard over the dp dim of the 2x2 mesh on
top of the plan, each dp row with its own batch (the reference trains on both), the full state dict and a
round trip of it through a fresh FSDP x TP model checked too."""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun import nn  # noqa: E402
from trainrun.distributed.fsdp import fully_shard  # noqa: E402
from trainrun.distributed.tensor import DTensor, Replicate, Shard, init_device_mesh  # noqa: E402
from trainrun.distributed.tensor.placement_types import _StridedShard  # noqa: E402
from trainrun.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,  # noqa: E402
                                                  SequenceParallel, loss_parallel, parallelize_module)

VOCAB, DIM, HEADS, SEQ, BATCH = 24, 16, 4, 6, 3


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = DIM // HEADS
        self.wq, self.wk, self.wv = (nn.Linear(DIM, DIM, bias=False) for _ in range(3))
        self.wo = nn.Linear(DIM, DIM, bias=True)

    def forward(self, x):
        bs, seq, _ = x.shape
        q, k, v = (w(x).view(bs, seq, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # local heads under TP
        return self.wo(out.transpose(1, 2).reshape(bs, seq, -1))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1, self.w3 = nn.Linear(DIM, 2 * DIM), nn.Linear(DIM, 2 * DIM)
        self.w2 = nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm, self.ffn_norm = nn.RMSNorm(DIM), nn.RMSNorm(DIM)
        self.attention, self.feed_forward = Attention(), FeedForward()

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block()])
        self.norm = nn.RMSNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def plan(loss_sharded, sequence_parallel=False):
    if sequence_parallel:  # torchtitan's: activations between the blocks' matmuls sharded along the sequence
        return {
            "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "layers.*.attention_norm": SequenceParallel(), "layers.*.ffn_norm": SequenceParallel(),
            "layers.*.attention.wq": ColwiseParallel(input_layouts=Shard(1)),
            "layers.*.attention.wk": ColwiseParallel(input_layouts=Shard(1)),
            "layers.*.attention.wv": ColwiseParallel(input_layouts=Shard(1)),
            "layers.*.attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "layers.*.feed_forward.w1": ColwiseParallel(input_layouts=Shard(1)),
            "layers.*.feed_forward.w3": ColwiseParallel(input_layouts=Shard(1)),
            "layers.*.feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "norm": SequenceParallel(),
            "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
        }
    return {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate()),
        "layers.*.attention.wq": ColwiseParallel(), "layers.*.attention.wk": ColwiseParallel(),
        "layers.*.attention.wv": ColwiseParallel(), "layers.*.attention.wo": RowwiseParallel(),
        "layers.*.feed_forward.w1": ColwiseParallel(), "layers.*.feed_forward.w3": ColwiseParallel(),
        "layers.*.feed_forward.w2": RowwiseParallel(),
        "output": ColwiseParallel(use_local_output=False) if loss_sharded else
        ColwiseParallel(output_layouts=Replicate()),
    }


def full(value):
    return value.full_tensor() if isinstance(value, DTensor) else value


def main():
    import datetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    shape = tuple(int(s) for s in sys.argv[1].split("x"))
    loss_sharded = "loss_parallel" in sys.argv
    sequence_parallel = "sequence_parallel" in sys.argv
    names = ("tp",) if len(shape) == 1 else ("dp", "tp")
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    tp_mesh = mesh["tp"]
    tr.manual_seed(0)
    reference = Model()
    tr.manual_seed(0)
    use_fsdp = "fsdp" in sys.argv

    def make():
        model = parallelize_module(Model(), tp_mesh, plan(loss_sharded, sequence_parallel))
        if use_fsdp:
            for block in model.layers:
                fully_shard(block, mesh=mesh["dp"])
            fully_shard(model, mesh=mesh["dp"])
        return model
    model = make()
    failures = []
    # FSDP's rows are a block of each TP piece: a strided shard over dp (PyTorch's layout for FSDP x TP)
    want = (_StridedShard(0, split_factor=tp_mesh.size()), Shard(0)) if use_fsdp else (Shard(0),)
    if not isinstance(model.output.weight, DTensor) or model.output.weight.placements != want or \
            tuple(model.output.weight.shape) != (VOCAB, DIM):
        failures.append(f"output.weight is not a {want} DTensor of ({VOCAB}, {DIM}): {model.output.weight!r}")
    dp, dp_rank = (mesh.size(0), mesh.get_local_rank(0)) if use_fsdp else (1, 0)
    opt_ref = tr.optim.AdamW(reference.parameters(), lr=1e-2)
    opt = tr.optim.AdamW(model.parameters(), lr=1e-2)
    names_ref = dict(reference.named_modules())
    rng = np.random.default_rng(1)
    for step in range(10):
        all_tokens = tr.tensor(rng.integers(0, VOCAB, size=(dp * BATCH, SEQ)))  # dp rows: a batch each
        all_targets = tr.tensor(rng.integers(0, VOCAB, size=(dp * BATCH, SEQ)))
        tokens, targets = (t[dp_rank * BATCH:(dp_rank + 1) * BATCH] for t in (all_tokens, all_targets))
        ref_loss = F.cross_entropy(reference(all_tokens).reshape(-1, VOCAB), all_targets.reshape(-1))
        logits = model(tokens)
        if loss_sharded:
            with loss_parallel():
                loss = F.cross_entropy(logits.reshape(BATCH * SEQ, VOCAB), targets.reshape(-1))
        else:
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        opt_ref.zero_grad()
        opt.zero_grad()
        ref_loss.backward()
        loss.backward()
        mean_loss = tr.tensor([loss.item()])
        if use_fsdp:
            dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG, group=mesh.get_group(0))
        if abs(mean_loss.item() - ref_loss.item()) > 1e-5:
            failures.append(f"step {step}: loss {loss.item()} vs {ref_loss.item()}")
        for name, module in model.named_modules():
            for pname in ("weight", "bias"):
                if pname not in dict(module.named_parameters(False)):
                    continue
                p = getattr(module, pname)
                g = p.grad
                got = full(g).numpy() if g is not None else None
                want = getattr(names_ref[name], pname).grad.numpy()
                if got is None or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                    failures.append(f"step {step}: gradient of {name}.{pname} differs")
        norm_ref = nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # the shards' norms combined over the ranks
        if abs(norm.item() - norm_ref.item()) > 1e-4 * max(1.0, norm_ref.item()):
            failures.append(f"step {step}: clip_grad_norm_ {norm.item()} vs {norm_ref.item()}")
        opt_ref.step()
        opt.step()
    if use_fsdp:  # the full state dict is the reference's, and loads back into a fresh FSDP x TP model
        sd = model.state_dict()
        fresh = {k: full(v) for k, v in sd.items()}
        for k, v in reference.state_dict().items():
            if not np.allclose(fresh[k].detach().numpy(), v.detach().numpy(), rtol=1e-4, atol=1e-5):
                failures.append(f"final {k} differs from the reference")
        tr.manual_seed(5)
        other = make()
        other.load_state_dict(fresh)
        for k, v in other.state_dict().items():
            if not np.array_equal(full(v).detach().numpy(), fresh[k].detach().numpy()):
                failures.append(f"{k} differs after load_state_dict of the full state dict")
            if isinstance(v, DTensor) and not np.array_equal(v.to_local().detach().numpy(),
                                                             sd[k].to_local().detach().numpy()):
                failures.append(f"{k}: the loaded shard is not the saved one")
    if failures:
        print(f"rank {dist.get_rank()}: failures:\n  " + "\n  ".join(failures[:20]), flush=True)
        sys.exit(1)
    print(f"rank {dist.get_rank()}: tensor parallel ok (final loss {loss.item():.6f})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
