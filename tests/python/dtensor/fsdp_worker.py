"""A rank of test_dtensor.py: a 4-block transformer (embedding, attention,
SwiGLU MLP, RMSNorm, output head untied or tied to the embedding) under
fully_shard on every block and the root, 20 AdamW steps with each rank's own
batch, next to the same model trained in one process on the concatenated
batch: per-step losses and final full parameters must agree. argv: mode
("plain", "tied", "hsdp" on a 2x2 mesh, "accumulate" with
set_requires_gradient_sync, "twice": two forwards (halves of the batch) before one backward of their sum, each
backward node gathering its own forward's freed parameters again, "bf16" param_dtype, "vocab1001" uneven shards,
"frozen" with a frozen embedding, "noreshard", "reshard2" with reshard_after_forward=2,
"explicit" with set_modules_to_forward_prefetch/backward_prefetch naming the neighbours, "dim1" with
shard_placement_fn sharding every matrix along dim 1, "ignored" with the gate's scale in ignored_params: left
whole, its gradient averaged by hand, "meta" built on the meta device, sharded, then materialised with
to_empty and initialised by reset_parameters: the same weights as the reference, without any rank holding
more than its shards and the span of one parameter)."""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun import nn  # noqa: E402
from trainrun.distributed.device_mesh import init_device_mesh  # noqa: E402
from trainrun.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard  # noqa: E402
from trainrun.distributed.tensor import DTensor, Shard  # noqa: E402
from trainrun.distributed.tensor.debug import CommDebugMode  # noqa: E402

DIM, HEADS, SEQ, BATCH = 16, 4, 6, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = DIM // HEADS
        self.attention_norm, self.ffn_norm = nn.RMSNorm(DIM), nn.RMSNorm(DIM)
        self.wqkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)
        self.w1, self.w3, self.w2 = nn.Linear(DIM, 2 * DIM), nn.Linear(DIM, 2 * DIM), nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        bs, seq, _ = x.shape
        q, k, v = self.wqkv(self.attention_norm(x)).view(bs, seq, 3, HEADS, self.head_dim).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(bs, seq, DIM)
        h = x + self.wo(a)
        y = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(y)) * self.w3(y))


class Gate(nn.Module):
    """A Python module reading its own parameter in forward (it must see the gathered one)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(tr.ones(DIM))

    def reset_parameters(self):
        nn.init.ones_(self.scale)

    def forward(self, x):
        return x * self.scale


class Model(nn.Module):
    def __init__(self, vocab, tied):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, DIM)
        self.gate = Gate()
        self.layers = nn.ModuleList([Block() for _ in range(4)])
        self.norm = nn.RMSNorm(DIM)
        self.output = nn.Linear(DIM, vocab, bias=False)
        if tied:
            self.output.weight = self.tok_embeddings.weight  # PyTorch's idiom for tying

    def forward(self, tokens):
        h = self.gate(self.tok_embeddings(tokens))
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def full(t):
    return (t.full_tensor() if isinstance(t, DTensor) else t).detach().float().numpy()


def materialise(model, failures):
    """to_empty then reset_parameters in construction order (the reference's draws), under the CPU allocator's
    counters: afterwards the rank holds its shards; on the way, at most the span the largest parameter's piece
    is drawn from on top of them, never the whole model."""
    shards = sum(p.to_local().numel() * 4 for p in model.parameters())  # this rank's pieces (of the DTensors)
    whole = {k: v.numel() * 4 for k, v in model.state_dict().items()}  # DTensors: the global sizes
    slack = 64 * len(whole)  # the allocator's alignment
    base = tr._C._cpu_memory_allocated()
    tr._C._cpu_reset_peak_memory_stats()
    model.to_empty(device="cpu")
    tr.manual_seed(0)
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    held, peak = tr._C._cpu_memory_allocated() - base, tr._C._cpu_max_memory_allocated() - base
    if held > shards + slack or peak > shards + max(whole.values()) + slack or sum(whole.values()) <= shards:
        failures.append(f"materialising held {held} B (peak {peak} B) for shards of {shards} B of a "
                        f"{sum(whole.values())} B model")
    if any(p.is_meta for p in model.parameters()) or not isinstance(model.layers[0].wqkv.weight, DTensor):
        failures.append("to_empty left a meta parameter or lost the DTensor view")


def main():
    import datetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    mode = sys.argv[1]
    world, rank = dist.get_world_size(), dist.get_rank()
    vocab = 1001 if mode == "vocab1001" else 29
    tied = mode in ("tied", "tiedgroup")
    tr.manual_seed(0)
    reference = Model(vocab, tied)
    tr.manual_seed(0)
    if mode == "meta":
        with tr.device("meta"):
            model = Model(vocab, tied)
        if not all(p.is_meta for p in model.parameters()):
            print(f"rank {rank}: failures:\n  a parameter built under device('meta') has memory", flush=True)
            sys.exit(1)
    else:
        model = Model(vocab, tied)
    if mode == "frozen":
        for m in (reference, model):
            m.tok_embeddings.weight.requires_grad_(False)
    failures = []
    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("replicate", "shard")) if mode == "hsdp" \
        else None
    mp = MixedPrecisionPolicy(param_dtype=tr.bfloat16, reduce_dtype=tr.float32) if mode == "bf16" else None
    reshard = {"noreshard": False, "reshard2": 2}.get(mode, True)
    if mode == "tiedgroup":  # the tied embedding and head as one group over two modules (PyTorch's list form)
        fully_shard([model.tok_embeddings, model.output], mesh=mesh, mp_policy=mp)
    placement_fn = (lambda p: Shard(1) if p.ndim == 2 else None) if mode == "dim1" else None
    for block in model.layers:
        fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard, shard_placement_fn=placement_fn)
    ignored = {model.gate.scale} if mode == "ignored" else None
    fully_shard(model, mesh=mesh, mp_policy=mp, shard_placement_fn=placement_fn, ignored_params=ignored)
    if mode == "meta":
        materialise(model, failures)
    if mode == "dim1" and model.layers[0].wqkv.weight.placements != (Shard(1),):
        failures.append(f"shard_placement_fn: wqkv.weight is {model.layers[0].wqkv.weight.placements}")
    if mode == "ignored" and isinstance(model.gate.scale, DTensor):
        failures.append("an ignored parameter was sharded")
    if mode == "explicit":  # what the implicit order would pick too: the same collectives, the same numbers
        for i, block in enumerate(model.layers):
            block.set_modules_to_forward_prefetch(list(model.layers[i + 1:i + 2]))
            block.set_modules_to_backward_prefetch(list(model.layers[max(i - 1, 0):i]))
    if not isinstance(model, FSDPModule) or type(model).__name__ != "FSDPModel":
        failures.append(f"the root's class is {type(model).__name__}")
    if mode == "tiedgroup" and (type(model.tok_embeddings).__name__, type(model.output).__name__) != \
            ("FSDPEmbedding", "FSDPLinear"):
        failures.append(f"the pair's classes are {type(model.tok_embeddings).__name__}, "
                        f"{type(model.output).__name__}")
    names = [n for n, _ in model.named_parameters()]
    if names != [n for n, _ in reference.named_parameters()]:
        failures.append(f"parameter names changed: {names[:4]}")
    opt_ref = tr.optim.AdamW([p for p in reference.parameters() if p.requires_grad], lr=1e-2)
    opt = tr.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    rng = np.random.default_rng(1)
    # bf16 compute is checked to its precision; with 1001 classes, Adam turns the different GEMM blockings of a
    # 24-row and a 12-row batch (float32 rounding) into differences of a few 1e-5 after 20 steps.
    tolerance = 3e-2 if mode == "bf16" else 1e-4 if mode == "vocab1001" else 1e-5
    for step in range(20):
        tokens = [tr.tensor(rng.integers(0, vocab, size=(BATCH, SEQ))) for _ in range(world)]
        targets = [tr.tensor(rng.integers(0, vocab, size=(BATCH, SEQ))) for _ in range(world)]
        micro = 2 if mode in ("accumulate", "twice") else 1
        opt_ref.zero_grad()
        ref_loss = F.cross_entropy(reference(tr.cat(tokens)).reshape(-1, vocab), tr.cat(targets).reshape(-1))
        ref_loss.backward()
        opt.zero_grad()
        mine_t, mine_y = tokens[rank], targets[rank]
        with CommDebugMode() as comm:
            losses = []
            pending = []
            for k in range(micro):  # accumulate: halves of the batch, syncing only on the last
                if mode == "accumulate":
                    model.set_requires_gradient_sync(k == micro - 1)
                part = slice(k * BATCH // micro, (k + 1) * BATCH // micro)
                loss = F.cross_entropy(model(mine_t[part]).reshape(-1, vocab), mine_y[part].reshape(-1)) / micro
                if mode == "twice":
                    pending.append(loss)
                else:
                    loss.backward()
                losses.append(loss.item())
            if pending:
                sum(pending[1:], pending[0]).backward()
        if mode == "ignored":  # FSDP leaves its gradient alone: data parallelism by hand
            dist.all_reduce(model.gate.scale.grad, op=dist.ReduceOp.AVG)
        total = tr.tensor([sum(losses)])
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        if abs(total.item() - ref_loss.item()) > tolerance * max(1.0, abs(ref_loss.item())):
            failures.append(f"step {step}: loss {total.item()} vs {ref_loss.item()}")
        counts = comm.get_comm_counts()
        groups = 6 if mode == "tiedgroup" else 5  # the four blocks and the root (and the tied pair)
        # Resharded blocks gather again in backward; the root keeps its parameters for backward.
        gathers = groups + (4 if reshard else 0) + (1 if mode == "tiedgroup" else 0)  # the pair is not the root
        counted = ("plain", "tied", "noreshard", "tiedgroup", "reshard2", "explicit", "dim1")
        funcol = tr.ops.c10d_functional  # (PyTorch's keys)
        if mode in counted and (counts.get(funcol.all_gather_into_tensor) != gathers or
                                counts.get(funcol.reduce_scatter_tensor) != groups):
            failures.append(f"step {step}: collectives {counts}, expected {gathers} all-gathers and {groups} "
                            "reduce-scatters")
        norm_ref = nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # the shards' norms combined over the ranks
        if abs(norm.item() - norm_ref.item()) > max(tolerance, 1e-4) * max(1.0, norm_ref.item()):
            failures.append(f"step {step}: clip_grad_norm_ {norm.item()} vs {norm_ref.item()}")
        if not isinstance(norm, DTensor) or norm.full_tensor().item() != norm.item() or \
                f"{norm:.3f}" != f"{norm.item():.3f}":  # (a DTensor, as PyTorch's over DTensor gradients)
            failures.append(f"step {step}: clip_grad_norm_ gave a {type(norm).__name__}, not a replicated DTensor")
        opt_ref.step()
        opt.step()
    # The final weights to 5e-4 (5% of one step of lr 1e-2): Adam divides each step by the gradient's running
    # RMS, so where a gradient is near zero the sharded and the whole GEMMs' different float rounding moves a
    # weight by up to a few 1e-4 over 20 steps, by the BLAS kernels' blocking (the losses and norms above stay
    # within 1e-5; a gradient synced wrong would move weights by whole steps).
    for (name, p), (_, q) in zip(model.state_dict().items(), reference.state_dict().items()):
        if not np.allclose(full(p), full(q), rtol=max(tolerance, 5e-4), atol=max(tolerance, 5e-4)):
            failures.append(f"final {name} differs (max {np.abs(full(p) - full(q)).max()})")
    sd = model.state_dict()
    if not all(isinstance(v, DTensor) for k, v in sd.items() if "weight" in k):
        failures.append("state_dict() does not hold DTensors")
    if tied and model.output.weight.to_local().data_ptr() != model.tok_embeddings.weight.to_local().data_ptr():
        failures.append("the tied weight is no longer shared")
    # A full state dict loads into a sharded model (each rank keeps its shard).
    fresh_full = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in sd.items()}
    tr.manual_seed(3)
    other = Model(vocab, tied)
    for block in other.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(other, mesh=mesh)
    other.load_state_dict(fresh_full)
    for (name, a), (_, b) in zip(other.state_dict().items(), sd.items()):
        if not np.array_equal(full(a), full(b)):
            failures.append(f"load_state_dict of a full state dict: {name} differs")
    if failures:
        print(f"rank {rank}: failures:\n  " + "\n  ".join(failures[:20]), flush=True)
        sys.exit(1)
    print(f"rank {rank}: fsdp {mode} ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
