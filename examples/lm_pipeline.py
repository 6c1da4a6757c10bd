"""Pipeline parallelism for examples/train_lm.py (--pp N): each rank keeps one
stage of the language model, torchtitan's way. Every rank builds the whole
model from the same seed, then drops the blocks other stages own (their
names stay, so checkpoints move between layouts); the first stage keeps the
embeddings, the last the final norm and a copy of the token embedding for
the tied output layer, whose gradient the two copies sum after each step
(Megatron's embedding group), so both stay equal. Training runs a schedule
(GPipe or 1F1B) over microbatches; evaluation and sampling pass activations
stage to stage with plain send/recv."""
import trainrun as tr
import trainrun.distributed as dist
import trainrun.nn.functional as F
from trainrun.distributed.pipelining import PipelineStage, get_schedule_class


class Pipeline:
    def __init__(self, model, stages, schedule, microbatches, vocab, dim):
        self.index, self.stages, self.dim = dist.get_rank(), stages, dim
        self.first, self.last = self.index == 0, self.index == stages - 1
        layers = len(model.blocks)
        if layers < stages:
            raise SystemExit(f"--pp {stages}: the model has only {layers} blocks (one stage needs at least one)")
        mine = range(self.index * layers // stages, (self.index + 1) * layers // stages)
        for key in list(model.blocks.keys()):
            if int(key) not in mine:
                del model.blocks[key]
        if not self.first:
            model.position = None
        if not self.first and not self.last:
            model.token = None
        if not self.last:
            model.norm = None
        self.model = model
        self.tied = dist.new_group([0, stages - 1])  # every rank creates it; the two embedding copies use it
        self.stage = PipelineStage(model, self.index, stages)
        self.schedule = get_schedule_class(schedule)(
            self.stage, microbatches, loss_fn=lambda out, target: F.cross_entropy(out.reshape(-1, vocab),
                                                                                  target.reshape(-1)))

    def train_step(self, batch):
        """Forward and backward of the batch over the microbatches (gradients: the mean over them, as one
        batch gives); returns the batch's loss on every rank."""
        losses = []
        if self.first:
            self.schedule.step(batch[:, :-1])
        elif self.last:
            self.schedule.step(target=batch[:, 1:], losses=losses)
        else:
            self.schedule.step()
        if self.first or self.last:
            dist.all_reduce(self.model.token.weight.grad, group=self.tied)  # the tied copies' gradients
        loss = tr.tensor([sum(x.item() for x in losses) / len(losses) if losses else 0.0], dtype=tr.float64)
        dist.broadcast(loss, src=self.stages - 1)
        return loss.item()

    def clip_grad_norm_(self, max_norm):
        """clip_grad_norm_ over the whole model: the stages' squared norms summed (the tied weight once)."""
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
        """The logits of tokens on the last stage (None on the others); every stage runs its part."""
        with tr.no_grad():
            if self.first:
                x = self.model(tokens)
            else:
                x = tr.empty(tokens.shape[0], tokens.shape[1], self.dim)
                dist.recv(x, src=self.index - 1)
                x = self.model(x)
            if not self.last:
                dist.send(x.contiguous(), dst=self.index + 1)
                return None
            return x

    def next_token(self, choose, logits):
        """The token the last stage chose from its logits, on every rank."""
        token = tr.tensor([choose(logits) if self.last else 0])
        dist.broadcast(token, src=self.stages - 1)
        return int(token.item())
