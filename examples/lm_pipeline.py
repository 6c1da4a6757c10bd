"""Pipeline parallelism for examples/train_lm.py (--pp N): each rank keeps
its stages of the language model, torchtitan's way. Every rank builds the
whole model from the same seed, then drops the blocks other ranks own
(their names stay, so checkpoints move between layouts). GPipe and 1F1B
give each rank one stage; Interleaved1F1B, LoopedBFS and
InterleavedZeroBubble two, looped over the ranks (rank r runs stages r and
r + N); ZBVZeroBubble ("zb") two in a V (rank r runs stages r and
2N - 1 - r). The first stage embeds, the last applies the final norm and
the output layer tied to the token embedding: when they are on different
ranks, both keep that embedding and sum its two gradients after each step
(Megatron's embedding group), so the copies stay equal; in the V, rank 0
holds both and the tie is one tensor. Evaluation and sampling pass activations stage to stage with
plain send/recv."""
import trainrun as tr
import trainrun.distributed as dist
import trainrun.nn.functional as F
from trainrun.distributed.pipelining import PipelineStage, get_schedule_class
from trainrun.distributed.pipelining.schedules import loop_rank
from trainrun.distributed.pipelining.zero_bubble import v_rank

ALIASES = {"interleaved": "Interleaved1F1B", "zb": "ZBVZeroBubble"}
TWO_PER_RANK = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble")


class _StagePart:
    """What one stage runs of the model: its blocks, after the embeddings on the first stage, before the head
    on the last."""

    def __init__(self, model, keys, first, last):
        self.model, self.keys, self.first, self.last = model, keys, first, last

    def __call__(self, x):
        x = self.model.embed(x) if self.first else x
        x = self.model.run_blocks(x, self.keys)
        return self.model.head(x) if self.last else x


class Pipeline:
    def __init__(self, model, ranks, schedule, microbatches, vocab, dim):
        schedule = get_schedule_class(ALIASES.get(schedule.lower(), schedule)).__name__.replace("Schedule", "", 1)
        self.rank, self.ranks, self.dim = dist.get_rank(), ranks, dim
        self.per_rank = 2 if schedule in TWO_PER_RANK else 1
        self.num_stages = ranks * self.per_rank
        self.stage_rank = (lambda s: v_rank(s, ranks)) if schedule == "ZBVZeroBubble" else \
            (lambda s: loop_rank(s, ranks))
        self.last_rank = self.stage_rank(self.num_stages - 1)
        self.first, self.last = self.rank == 0, self.rank == self.last_rank  # hold stage 0 / the last stage
        layers = len(model.blocks)
        if layers < self.num_stages:
            raise SystemExit(f"--pp {ranks} --schedule {schedule}: {self.num_stages} stages need at least as many "
                             f"blocks, the model has {layers}")
        self.indices = [s for s in range(self.num_stages) if self.stage_rank(s) == self.rank]
        keys = {s: [str(b) for b in range(s * layers // self.num_stages, (s + 1) * layers // self.num_stages)]
                for s in self.indices}
        mine = {k for s in self.indices for k in keys[s]}
        for key in list(model.blocks.keys()):
            if key not in mine:
                del model.blocks[key]
        if not self.first:
            model.position = None
        if not self.first and not self.last:
            model.token = None
        if not self.last:
            model.norm = None
        self.model = model
        self.tied = dist.new_group(sorted({0, self.last_rank}))  # every rank creates it; the embedding copies use it
        self.parts = [_StagePart(model, keys[s], s == 0, s == self.num_stages - 1) for s in self.indices]
        stages = [PipelineStage(part, s, self.num_stages) for part, s in zip(self.parts, self.indices)]
        self.schedule = get_schedule_class(schedule)(
            stages if self.per_rank > 1 else stages[0], microbatches,
            loss_fn=lambda out, target: F.cross_entropy(out.reshape(-1, vocab), target.reshape(-1)))

    def train_step(self, batch):
        """Forward and backward of the batch over the microbatches (gradients: the mean over them, as one
        batch gives); returns the batch's loss on every rank."""
        losses = []
        if self.first and self.last:
            self.schedule.step(batch[:, :-1], target=batch[:, 1:], losses=losses)
        elif self.first:
            self.schedule.step(batch[:, :-1])
        elif self.last:
            self.schedule.step(target=batch[:, 1:], losses=losses)
        else:
            self.schedule.step()
        if (self.first or self.last) and self.last_rank != 0:
            dist.all_reduce(self.model.token.weight.grad, group=self.tied)  # the tied copies' gradients
        loss = tr.tensor([sum(x.item() for x in losses) / len(losses) if losses else 0.0], dtype=tr.float64)
        dist.broadcast(loss, src=self.last_rank)
        return loss.item()

    def clip_grad_norm_(self, max_norm):
        """clip_grad_norm_ over the whole model: the ranks' squared norms summed (the tied weight once)."""
        counted = [p for name, p in self.model.named_parameters()
                   if p.grad is not None and not (name == "token.weight" and self.last and not self.first)]
        total = tr.tensor([sum(float((p.grad.double() ** 2).sum().item()) for p in counted)], dtype=tr.float64)
        dist.all_reduce(total)
        norm = total.item() ** 0.5
        scale = max_norm / (norm + 1e-6)
        if scale < 1.0:
            with tr.no_grad():
                for p in self.model.parameters():
                    if p.grad is not None:
                        p.grad.mul_(scale)
        return norm

    def logits(self, tokens):
        """The logits of tokens on the rank of the last stage (None on the others); every stage runs its part,
        in stage order around the ranks."""
        with tr.no_grad():
            x = tokens
            for part, s in zip(self.parts, self.indices):
                if s > 0 and self.stage_rank(s - 1) != self.rank:
                    x = tr.empty(tokens.shape[0], tokens.shape[1], self.dim)
                    dist.recv(x, src=self.stage_rank(s - 1))
                x = part(x)
                if s < self.num_stages - 1 and self.stage_rank(s + 1) != self.rank:
                    dist.send(x.contiguous(), dst=self.stage_rank(s + 1))
            return x if self.last else None

    def next_token(self, choose, logits):
        """The token the last stage chose from its logits, on every rank."""
        token = tr.tensor([choose(logits) if self.last else 0])
        dist.broadcast(token, src=self.last_rank)
        return int(token.item())
