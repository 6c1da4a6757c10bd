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
plain send/recv.

With more ranks than pipeline ranks the job is PP x FSDP (torchtitan's): the
world is a (dp, pp) mesh, a pipeline's ranks consecutive; each replica of the
pipeline trains on its own data, and each stage is fully_shard'ed over its dp
ranks (every block, then the stage's remaining modules as one group), so the
schedule unshards a stage before its first microbatch and reduce-scatters its
gradients in its last weight pass."""
import trainrun as tr
import trainrun.distributed as dist
import trainrun.nn.functional as F
from trainrun.distributed.device_mesh import init_device_mesh
from trainrun.distributed.fsdp import fully_shard
from trainrun.distributed.pipelining import PipelineStage, get_schedule_class
from trainrun.distributed.pipelining.schedules import loop_rank
from trainrun.distributed.pipelining.zero_bubble import v_rank

ALIASES = {"interleaved": "Interleaved1F1B", "zb": "ZBVZeroBubble"}
TWO_PER_RANK = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble")


def _local(t):
    """This rank's piece of a gradient: a DTensor's shard (fully_shard), or the tensor itself."""
    return t.to_local() if hasattr(t, "to_local") else t


class _StagePart(tr.nn.Module):
    """What one stage runs of the model: its blocks, after the embeddings on the first stage, before the head
    on the last. A module of the model's own modules (shared, not copied), so that fully_shard can make it one
    group and the schedule find it; its forward is the model's, on this part's modules."""

    def __init__(self, model, keys, first, last):
        super().__init__()
        self.blocks = tr.nn.ModuleDict({k: model.blocks[k] for k in keys})
        self.token = model.token if first or last else None
        self.position = model.position if first else None
        self.norm = model.norm if last else None
        self.first, self.last, self._model_class = first, last, type(model)

    def forward(self, x):
        model = self._model_class  # its embed, run_blocks and head read only the modules this part holds
        x = model.embed(self, x) if self.first else x
        x = model.run_blocks(self, x, self.blocks.keys())
        return model.head(self, x) if self.last else x


class Pipeline:
    def __init__(self, model, ranks, schedule, microbatches, vocab, dim, dp=1):
        """ranks: the pipeline's ranks (its stages' ranks); dp: data-parallel replicas of the pipeline, each
        stage sharded by fully_shard over its dp ranks (the world is dp x ranks, a pipeline's ranks
        consecutive)."""
        schedule = get_schedule_class(ALIASES.get(schedule.lower(), schedule)).__name__.replace("Schedule", "", 1)
        self.ranks, self.dim, self.dp = ranks, dim, dp
        self.rank = dist.get_rank() % ranks  # the rank within this pipeline
        self.global_rank = lambda r, base=dist.get_rank() - self.rank: base + r  # a pipeline rank's global rank
        self.per_rank = 2 if schedule in TWO_PER_RANK else 1
        self.num_stages = ranks * self.per_rank
        self.stage_rank = (lambda s: v_rank(s, ranks)) if schedule == "ZBVZeroBubble" else \
            (lambda s: loop_rank(s, ranks))
        self.last_rank = self.stage_rank(self.num_stages - 1)
        self.first, self.last = self.rank == 0, self.rank == self.last_rank  # hold stage 0 / the last stage
        if dp > 1 and self.last_rank == 0:
            raise SystemExit(f"--schedule {schedule} puts the first and the last stage on one rank, where both "
                             "use the tied embedding: with data parallelism inside the stages it would be one "
                             "fully_shard group in two stages; use 1F1B, GPipe, Interleaved1F1B or LoopedBFS")
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
        # The embedding copies of each replica sum their gradients (every rank creates every group).
        for replica in range(dist.get_world_size() // ranks):
            group = dist.new_group(sorted({replica * ranks, replica * ranks + self.last_rank}))
            if self.global_rank(0) == replica * ranks:
                self.tied = group
        self.parts = [_StagePart(model, keys[s], s == 0, s == self.num_stages - 1) for s in self.indices]
        group = None
        if dp > 1:
            mesh = init_device_mesh("cpu", (dp, ranks), mesh_dim_names=("dp", "pp"))
            group = mesh.get_group("pp")
            for part in self.parts:  # each block a group, then the part's embeddings or head (torchtitan's way)
                for block in part.blocks.values():
                    fully_shard(block, mesh=mesh["dp"])
                fully_shard(part, mesh=mesh["dp"])
        stages = [PipelineStage(part, s, self.num_stages, group=group) for part, s in zip(self.parts, self.indices)]
        self.schedule = get_schedule_class(schedule)(
            stages if self.per_rank > 1 else stages[0], microbatches,
            loss_fn=lambda out, target: F.cross_entropy(out.reshape(-1, vocab), target.reshape(-1)))

    def train_step(self, batch):
        """Forward and backward of the batch over the microbatches (gradients: the mean over them, as one
        batch gives); returns the batch's loss (the mean over the replicas) on every rank."""
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
            dist.all_reduce(_local(self.model.token.weight.grad), group=self.tied)  # the tied copies' gradients
        loss = tr.tensor([sum(x.item() for x in losses) / len(losses) if losses else 0.0], dtype=tr.float64)
        dist.all_reduce(loss)  # the last stages' losses (the other ranks add 0)
        return loss.item() / self.dp

    def clip_grad_norm_(self, max_norm):
        """clip_grad_norm_ over the whole model: the ranks' squared norms summed (the tied weight once)."""
        counted = [p for name, p in self.model.named_parameters()
                   if p.grad is not None and not (name == "token.weight" and self.last and not self.first)]
        total = tr.tensor([sum(float((_local(p.grad).double() ** 2).sum().item()) for p in counted)],
                          dtype=tr.float64)  # FSDP's shards are disjoint: their squares add up over the ranks
        dist.all_reduce(total)
        norm = total.item() ** 0.5
        scale = max_norm / (norm + 1e-6)
        if scale < 1.0:
            with tr.no_grad():
                for p in self.model.parameters():
                    if p.grad is not None:
                        _local(p.grad).mul_(scale)
        return norm

    def logits(self, tokens):
        """The logits of tokens on the rank of the last stage (None on the others); every stage runs its part,
        in stage order around the ranks."""
        with tr.no_grad():
            x = tokens
            for part, s in zip(self.parts, self.indices):
                if s > 0 and self.stage_rank(s - 1) != self.rank:
                    x = tr.empty(tokens.shape[0], tokens.shape[1], self.dim)
                    dist.recv(x, src=self.global_rank(self.stage_rank(s - 1)))
                x = part(x)
                if s < self.num_stages - 1 and self.stage_rank(s + 1) != self.rank:
                    dist.send(x.contiguous(), dst=self.global_rank(self.stage_rank(s + 1)))
            return x if self.last else None

    def next_token(self, choose, logits):
        """The token the last stage chose from its logits, on every rank (the first replica's: all draw the same)."""
        token = tr.tensor([choose(logits) if self.last else 0])
        dist.broadcast(token, src=self.last_rank)
        return int(token.item())
