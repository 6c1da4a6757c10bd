#!/usr/bin/env python3
"""Tensor parallelism as PyTorch's users write it (torchtitan's recipe), on a
small character-level language model: a DeviceMesh over the ranks,
parallelize_module with ColwiseParallel/RowwiseParallel for the attention
and MLP projections, the embedding split over the vocabulary, and the loss
computed on class-sharded logits with loss_parallel.

    trainrun --nproc-per-node 4 examples/tp_transformer.py [--tp 2] [--steps 60]
    trainrun --nproc-per-node 4 examples/tp_transformer.py --fsdp   # FSDP2 instead of TP

With --tp smaller than the world, the mesh is (dp, tp): each dp row trains
on its own batches and DDP-style gradient averaging is done over the dp
groups. The text is the Zen of Python (read from the `this` module's source and
rot13-decoded), so nothing is downloaded."""
import argparse
import codecs
import math
import pathlib
import sys
import importlib.util

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
import trainrun as torch  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
import trainrun.nn as nn  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun.distributed.device_mesh import init_device_mesh  # noqa: E402
from trainrun.distributed.fsdp import fully_shard  # noqa: E402
from trainrun.distributed.tensor import Replicate  # noqa: E402
from trainrun.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, loss_parallel,  # noqa: E402
                                                  parallelize_module)


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.head_dim = dim // n_heads
        self.wq, self.wk, self.wv = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        bs, seq, _ = x.shape
        q, k, v = (w(x).view(bs, seq, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # this rank's heads
        return self.wo(out.transpose(1, 2).reshape(bs, seq, -1))


class Block(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.attention_norm, self.ffn_norm = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.attention = Attention(dim, n_heads)
        self.w1, self.w3 = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(dim, 4 * dim, bias=False)
        self.w2 = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        y = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(y)) * self.w3(y))


class CharLM(nn.Module):
    def __init__(self, vocab, dim=64, n_heads=4, n_layers=2, seq=32):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.layers = nn.ModuleList([Block(dim, n_heads) for _ in range(n_layers)])
        self.norm = nn.RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens) + self.pos[:tokens.shape[1]]
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def tp_plan():
    return {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate()),
        "layers.*.attention.wq": ColwiseParallel(), "layers.*.attention.wk": ColwiseParallel(),
        "layers.*.attention.wv": ColwiseParallel(), "layers.*.attention.wo": RowwiseParallel(),
        "layers.*.w1": ColwiseParallel(), "layers.*.w3": ColwiseParallel(), "layers.*.w2": RowwiseParallel(),
        "output": ColwiseParallel(use_local_output=False),  # class-sharded logits, for loss_parallel
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tp", type=int, default=None, help="tensor-parallel degree (default: all ranks)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--fsdp", action="store_true", help="fully_shard every block and the root over all ranks "
                        "(data parallel, each rank its own batches) instead of tensor parallelism")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    tp = 1 if args.fsdp else (args.tp or world)
    mesh = init_device_mesh("cpu", (world // tp, tp), mesh_dim_names=("dp", "tp"))
    source = pathlib.Path(importlib.util.find_spec("this").origin).read_text()  # read, not imported: no print
    text = codecs.decode(source.split('"""')[1], "rot13")
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text])
    torch.manual_seed(0)  # every rank builds the same weights; each keeps its shards
    if args.fsdp:
        model = CharLM(len(chars), seq=args.seq)
        for block in model.layers:
            fully_shard(block)
        fully_shard(model)
    else:
        model = parallelize_module(CharLM(len(chars), seq=args.seq), mesh["tp"], tp_plan())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    dp_group, dp_rank = mesh.get_group("dp"), mesh.get_local_rank("dp")
    generator = torch.Generator().manual_seed(100 + dp_rank)  # each dp row its own batches
    for step in range(args.steps):
        starts = torch.randperm(len(data) - args.seq - 1, generator=generator)[:args.batch].tolist()
        x = torch.stack([data[s:s + args.seq] for s in starts])
        y = torch.stack([data[s + 1:s + args.seq + 1] for s in starts])
        if args.fsdp:
            loss = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
        else:
            with loss_parallel():
                loss = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()  # under FSDP, this also reduce-scatters the gradients (the mean over ranks)
        if mesh.size(0) > 1 and not args.fsdp:  # data parallel over the dp dim: average the gradients of the tp shards
            for p in model.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=dp_group)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if dist.get_rank() == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {loss.item():.4f}  (uniform {math.log(len(chars)):.4f})  "
                  f"grad norm {norm.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
