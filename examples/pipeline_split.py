"""Pipeline parallelism in a few lines: a small transformer-like language model cut into one stage per rank
by pipeline() and trained with 1F1B on a task it can learn (predict the token after each one of a repeating
sequence). Run it with the launcher:

    trainrun --nproc-per-node 2 examples/pipeline_split.py

With `import torch as trainrun` under torchrun, PyTorch 2.6's pipeline() cuts the same stages (the same
parameter names) but its last stage fails in backward ("Can't detach views in-place"); with the block's MLP
as an nn.Sequential, its split refuses the model ("Child module 'layers.2._modules.mlp.0' is not a
descendant of parent module 'layers.2.mlp'"), which trainrun's takes."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
import trainrun  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
import trainrun.nn as nn  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun.distributed.pipelining import Schedule1F1B, SplitPoint, pipeline  # noqa: E402

VOCAB, DIM, LAYERS, SEQ, BATCH, MICROBATCHES = 16, 32, 4, 12, 16, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, h):
        return h + self.down(F.gelu(self.up(self.norm(h))))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h))


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    trainrun.manual_seed(0)  # every rank builds the same model, then keeps its stage
    model = TinyLM()
    per_stage = LAYERS // world
    split_spec = {f"layers.{i * per_stage}": SplitPoint.BEGINNING for i in range(1, world)}
    example = trainrun.zeros(BATCH // MICROBATCHES, SEQ, dtype=trainrun.long)
    pipe = pipeline(model, mb_args=(example,), split_spec=split_spec)
    stage = pipe.build_stage(rank, device=trainrun.device("cpu"))
    stage_module = pipe.get_stage_module(rank)

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))
    schedule = Schedule1F1B(stage, n_microbatches=MICROBATCHES, loss_fn=loss_fn)
    optimizer = trainrun.optim.AdamW(stage_module.parameters(), lr=3e-3)
    names = sorted({n.split(".")[0] + ("." + n.split(".")[1] if n.startswith("layers") else "")
                    for n, _ in stage_module.named_parameters()})
    print(f"stage {rank}: {', '.join(names)}", flush=True)
    for step in range(60):
        start = trainrun.randint(0, VOCAB, (BATCH, 1))
        tokens = (start + trainrun.arange(SEQ + 1)) % VOCAB  # each sequence counts up from a random token
        x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()  # PyTorch 2.6 checks input strides
        optimizer.zero_grad()
        losses = []
        if rank == 0:
            schedule.step(x, target=y if world == 1 else None, losses=losses)
        else:
            schedule.step(target=y, losses=losses)
        optimizer.step()
        if losses and step % 10 in (0, 9):
            print(f"step {step:2d} loss {sum(l.item() for l in losses) / len(losses):.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
