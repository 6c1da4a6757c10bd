"""The main job: a byte-level GPT-style language model trained on every rank
`trainrun` starts, sharded with FSDP2 (or replicated with DDP).

    trainrun --nproc-per-node 2 examples/train_lm.py [--steps 300] [--ddp] [--resume]
    trainrun --nproc-per-node 4 examples/train_lm.py --tp 2   # FSDP2 over 2 x tensor parallelism over 2
    trainrun --nproc-per-node 2 examples/train_lm.py --pp 2   # two pipeline stages (lm_pipeline.py)

The corpus is the Python standard library's own source (found through
sysconfig, so every machine has it), split into training and held-out text
by file, so the held-out loss is honest. The model is a decoder-only
transformer: token and learned position embeddings, pre-norm blocks of
RMSNorm, causal self-attention (scaled_dot_product_attention) and a SwiGLU
MLP, and an output layer tied to the token embedding. Training is AdamW with
a linear warm-up then cosine decay and gradient clipping; the same seed gives
the same initial weights on any number of ranks.

Every --ckpt-every steps (and at the end) a distributed checkpoint of the
model, the optimizer and the step goes to RUN_DIR/ckpt/step_N; --resume
continues from the latest complete one, on the same or another number of
ranks, along the same loss curve (the data order is a function of the step).
At the end: held-out loss and perplexity next to the unigram baseline of the
same text, a sample of generated text, and RUN_DIR/loss.png. The last line
is `held-out loss L perplexity P (unigram baseline U) after S steps on N ranks
in T s`."""
import argparse
import contextlib
import json
import math
import os
import pathlib
import sys
import sysconfig
import time
import zlib

import numpy as np

ON_TORCH = "--on-torch" in sys.argv  # the same script on PyTorch 2.x, side by side (bench/train_lm.py)
if ON_TORCH:
    import torch as tr
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.elastic import metrics
    from torch.distributed.elastic.multiprocessing.errors import record
    from torch.utils.data import DataLoader, Dataset, DistributedSampler
    for _name in ("record_event", "wait_event", "wait_stream"):  # FSDP2 on CPU in 2.6 needs them (2.7: no-ops)
        if not hasattr(tr.cpu.Stream, _name):
            setattr(tr.cpu.Stream, _name, lambda self, *args, **kwargs: None)
else:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
    import trainrun as tr
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    import trainrun.nn.functional as F
    from trainrun import nn
    from trainrun.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from trainrun.distributed.elastic import metrics, record
    from trainrun.utils.data import DataLoader, Dataset, DistributedSampler

VOCAB = 256  # bytes


# ---- data ------------------------------------------------------------------------------------------------
def corpus(max_train_bytes, max_heldout_bytes):
    """The standard library's top-level modules: one file in ten (by a hash of its name) is held out."""
    files = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    train, heldout = [], []
    for path in files:
        (heldout if zlib.crc32(path.name.encode()) % 10 == 0 else train).append(path.read_bytes())

    def joined(parts, limit):
        data = b"\n".join(parts)[:limit]
        return np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    return joined(train, max_train_bytes), joined(heldout, max_heldout_bytes)


class Windows(Dataset):
    """Non-overlapping windows of ctx + 1 bytes: inputs are the first ctx, targets the last ctx."""

    def __init__(self, data, ctx):
        self.data, self.ctx = data, ctx

    def __len__(self):
        return (len(self.data) - 1) // self.ctx

    def __getitem__(self, i):
        return tr.from_numpy(self.data[i * self.ctx: i * self.ctx + self.ctx + 1].copy())


# ---- model ------------------------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.head_dim = dim // heads
        self.attn_norm = nn.RMSNorm(dim)
        # Separate projections, so that tensor parallelism splits each by heads (torchtitan's layout).
        self.wq, self.wk, self.wv = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.proj = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = nn.RMSNorm(dim)
        self.gate = nn.Linear(dim, 4 * dim, bias=False)
        self.up = nn.Linear(dim, 4 * dim, bias=False)
        self.down = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        batch, length, _ = x.shape
        h = self.attn_norm(x)
        # Under tensor parallelism each rank holds some of the heads: -1 counts them.
        q, k, v = (w(h).view(batch, length, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, -1))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LanguageModel(nn.Module):
    def __init__(self, dim, layers, heads, ctx):
        super().__init__()
        self.token = nn.Embedding(VOCAB, dim)
        self.position = nn.Embedding(ctx, dim)
        # Keyed by index (torchtitan's layout): a pipeline stage drops the others' blocks, names unchanged.
        self.blocks = nn.ModuleDict({str(i): Block(dim, heads) for i in range(layers)})
        self.norm = nn.RMSNorm(dim)

    def init_weights(self):
        """GPT-2's initialisation: N(0, 0.02) for the matrices, the residual projections scaled down by depth,
        ones for the norms. It sets every parameter, so a model built on the meta device, sharded and then
        materialised (to_empty) gets the weights one process would give it: a sharded parameter's DTensor
        draws its piece of the whole."""
        for name, _ in self.named_parameters():
            owner, _, leaf = name.rpartition(".")
            p = getattr(self.get_submodule(owner), leaf)
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * len(self.blocks)) if name.endswith(("proj.weight", "down.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            else:
                nn.init.ones_(p)

    def forward(self, tokens):
        return self.head(self.run_blocks(self.embed(tokens), self.blocks.keys()))

    # The three parts, which pipeline stages (lm_pipeline.py) run separately.
    def embed(self, tokens):
        return self.token(tokens) + self.position(tr.arange(tokens.shape[1]))

    def run_blocks(self, x, keys):
        for key in keys:
            x = self.blocks[key](x)
        return x

    def head(self, x):
        return F.linear(self.norm(x), self.token.weight)  # tied output


def shard(model, world, tp):
    """FSDP2 over all ranks (each block, then the root); with tp > 1, first the tensor-parallel plan on the
    "tp" dim of a (dp, tp) mesh (Megatron's: q, k, v, gate and up split by columns, proj and down by rows),
    then FSDP2 over "dp"."""
    import importlib
    fully_shard = importlib.import_module(f"{tr.__name__}.distributed.fsdp").fully_shard  # trainrun's or torch's
    mesh = None
    if tp > 1:
        init_device_mesh = importlib.import_module(f"{tr.__name__}.distributed.device_mesh").init_device_mesh
        parallel = importlib.import_module(f"{tr.__name__}.distributed.tensor.parallel")
        ColwiseParallel, RowwiseParallel = parallel.ColwiseParallel, parallel.RowwiseParallel
        parallelize_module = parallel.parallelize_module
        mesh = init_device_mesh("cpu", (world // tp, tp), mesh_dim_names=("dp", "tp"))
        columns, rows = ColwiseParallel(), RowwiseParallel()
        parallelize_module(model, mesh["tp"], {f"blocks.*.{name}": columns for name in ("wq", "wk", "wv", "gate", "up")}
                           | {"blocks.*.proj": rows, "blocks.*.down": rows})
        mesh = mesh["dp"]
    for block in model.blocks.values():  # (PyTorch 2.6's ZeRO-3 fails on CPU: there, blocks keep their gathers)
        fully_shard(block, mesh=mesh, reshard_after_forward=not ON_TORCH)
    fully_shard(model, mesh=mesh)


class ProgressBar:
    """A live bar on rank 0 between the progress lines, when its output reaches a terminal: directly, or
    through trainrun's console (TRAINRUN_CONSOLE_IS_TTY; the launcher draws lines ended by a lone carriage
    return over the current line). Elsewhere (a file, CI) nothing is drawn."""

    def __init__(self, total, enabled):
        self.direct = sys.stdout.isatty()
        self.enabled = enabled and (self.direct or os.environ.get("TRAINRUN_CONSOLE_IS_TTY") == "1")
        self.total, self.started, self.shown, self.last = total, time.monotonic(), False, 0.0

    def update(self, step, first_step, loss):
        now = time.monotonic()
        if not self.enabled or now - self.last < 0.1:
            return
        self.last = now
        rate = (now - self.started) / max(1, step - first_step)
        filled = int(30 * step / self.total)
        sys.stdout.write(f"[{'#' * filled}{'.' * (30 - filled)}] {step}/{self.total}  loss {loss:.4f}  "
                         f"ETA {rate * (self.total - step):5.0f} s\r")
        sys.stdout.flush()
        self.shown = True

    def clear(self):
        """Before an ordinary line: on a terminal of our own, erase the bar (trainrun's console does it)."""
        if self.shown and self.direct:
            sys.stdout.write("\x1b[K")
        self.shown = False


# ---- training ---------------------------------------------------------------------------------------------
def learning_rate(step, args):
    """Linear warm-up, then cosine decay to a tenth of the peak, as a factor of --lr."""
    if step < args.warmup:
        return (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def latest_checkpoint(run_dir):
    # Only step_N folders with their commit marker: a save cut short (a node lost mid-save) leaves
    # step_N.partial, which is neither a number nor complete.
    folders = [p for p in (run_dir / "ckpt").glob("step_*") if p.name[len("step_"):].isdigit()]
    complete = [p for p in folders if (p / ".committed").exists()]
    return max(complete, key=lambda p: int(p.name[len("step_"):])) if complete else None


def mean_over_ranks(value):
    if not dist.is_initialized():
        return value
    t = tr.tensor([value], dtype=tr.float64)
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()


def heldout_loss(logits_of, heldout, args, rank, world):
    """Mean cross-entropy over the first --eval-windows held-out windows, shared between the ranks."""
    data = Windows(heldout, args.ctx)
    indices = list(range(min(len(data), args.eval_windows)))
    total, count = 0.0, 0
    with tr.no_grad():
        for start in range(0, len(indices), args.batch):
            chunk = indices[start:start + args.batch]
            mine = chunk[rank::world]
            # Every rank runs the same number of forwards (FSDP gathers inside each): pad with a repeat.
            mine = mine or chunk[:1]
            batch = tr.stack([data[i] for i in mine])
            logits = logits_of(batch[:, :-1])
            if logits is None:  # a pipeline stage before the last: it ran its part
                continue
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1), reduction="sum")
            if chunk[rank::world]:
                total += loss.item()
                count += len(mine) * args.ctx
    if dist.is_initialized():
        t = tr.tensor([total, float(count)], dtype=tr.float64)
        dist.all_reduce(t)
        total, count = t.tolist()
    return total / count


def unigram_baseline(train, heldout):
    """Perplexity on the held-out bytes of byte frequencies counted on the training bytes (add-one)."""
    counts = np.bincount(train, minlength=VOCAB) + 1.0
    log_p = np.log(counts / counts.sum())
    return math.exp(-log_p[heldout].mean())


def sample(logits_of, prompt, length, ctx, seed, pipeline=None):
    """Bytes drawn from the model at temperature 0.8 (every rank draws the same: FSDP's forward is collective)."""
    generator = tr.Generator()
    generator.manual_seed(seed)
    tokens = list(prompt)
    with tr.no_grad():
        for _ in range(length):
            logits = logits_of(tr.tensor([tokens[-ctx:]]))

            def choose(logits):
                probs = tr.softmax(logits[0, -1] / 0.8, dim=-1)
                return int(tr.multinomial(probs, 1, generator=generator).item())
            tokens.append(pipeline.next_token(choose, logits) if pipeline is not None else choose(logits))
    return bytes(tokens).decode("utf-8", errors="replace")


def plot(run_dir, history):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return None
    steps, losses = zip(*history)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, losses)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats/byte)")
    ax.set_title("train_lm: byte-level LM on the Python standard library")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = run_dir / "loss.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ctx", type=int, default=128)
    p.add_argument("--batch", type=int, default=16, help="windows per step, over all ranks")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--ckpt-every", type=int, default=200)
    p.add_argument("--eval-windows", type=int, default=128)
    p.add_argument("--max-train-bytes", type=int, default=4 << 20)
    p.add_argument("--sample-bytes", type=int, default=120)
    p.add_argument("--run-dir", default="runs/train_lm")
    p.add_argument("--resume", action="store_true", help="continue from the latest complete checkpoint")
    p.add_argument("--ddp", action="store_true", help="DistributedDataParallel instead of FSDP2")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree: FSDP2 x TP on a (dp, tp) mesh")
    p.add_argument("--on-torch", action="store_true", help="run on PyTorch 2.x instead (its torchrun)")
    p.add_argument("--pp", type=int, default=1,
                   help="pipeline ranks; the other factor of the ranks shards each stage with FSDP2 (PP x FSDP)")
    p.add_argument("--schedule", default="1F1B",
                   help="the pipeline schedule: GPipe, 1F1B, or with two stages per rank Interleaved1F1B "
                        "(interleaved), LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble (zb)")
    p.add_argument("--microbatches", type=int, default=4, help="microbatches per step with --pp")
    p.add_argument("--stop-after", type=int, default=None, help="exit after this step (tests of --resume)")
    return p.parse_args(argv)


@record
def main(argv=None):
    args = parse_args(argv)
    started = time.monotonic()
    distributed = "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    if world % args.tp or (args.tp > 1 and args.ddp):
        raise SystemExit(f"--tp {args.tp} must divide the {world} ranks (and goes with FSDP2, not --ddp)")
    if args.pp > 1 and (world % args.pp or args.tp > 1 or args.ddp):
        raise SystemExit(f"--pp {args.pp} must divide the {world} ranks (the rest shard each stage with FSDP2), "
                         "and goes without --tp or --ddp")
    model_parallel = args.tp * args.pp
    dp = world // model_parallel  # data-parallel ranks; the ranks of one TP group or pipeline read the same data
    dp_rank = rank // model_parallel
    if args.batch % dp:
        raise SystemExit(f"--batch {args.batch} does not divide over {dp} data-parallel ranks")
    if args.pp > 1 and (args.batch // dp) % args.microbatches:
        raise SystemExit(f"--microbatches {args.microbatches} must divide each pipeline's batch ({args.batch // dp} "
                         f"of --batch {args.batch} over {dp} data-parallel replicas)")
    tr.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    run_dir = pathlib.Path(args.run_dir)
    if rank == 0:
        (run_dir / "ckpt").mkdir(parents=True, exist_ok=True)

    train, heldout = corpus(args.max_train_bytes, args.max_train_bytes // 8)
    # FSDP builds the model on the meta device, shards it, then gives each rank memory for its shards only: no
    # rank ever holds the whole model. Every way gets the same initial weights (any number of ranks).
    on_meta = distributed and not (args.ddp or args.pp > 1 or ON_TORCH)
    with tr.device("meta") if on_meta else contextlib.nullcontext():
        model = LanguageModel(args.dim, args.layers, args.heads, args.ctx)
    parameters = sum(p.numel() for p in model.parameters())
    if not on_meta:
        tr.manual_seed(args.seed)
        model.init_weights()
    pipeline = None
    if distributed and args.ddp:
        model = nn.parallel.DistributedDataParallel(model)
    elif distributed and args.pp > 1:
        from lm_pipeline import Pipeline
        pipeline = Pipeline(model, args.pp, args.schedule, args.microbatches, VOCAB, args.dim, dp=dp)
    elif distributed:
        shard(model, world, args.tp)
    if on_meta:
        model.to_empty(device="cpu")
        tr.manual_seed(args.seed)
        model.init_weights()
    logits_of = pipeline.logits if pipeline is not None else model
    optimizer = tr.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)

    start_step, history = 0, []
    checkpoint = latest_checkpoint(run_dir) if args.resume else None
    if checkpoint is not None:
        model_state, optim_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optim": optim_state, "step": 0, "history": []}
        dcp.load(state, checkpoint_id=str(checkpoint))
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        start_step, history = state["step"], [tuple(h) for h in state["history"]]
        if rank == 0:
            print(f"resumed from {checkpoint} at step {start_step}", flush=True)

    windows = Windows(train, args.ctx)
    sampler = DistributedSampler(windows, num_replicas=dp, rank=dp_rank, shuffle=True, seed=args.seed,
                                 drop_last=True)
    loader = DataLoader(windows, batch_size=args.batch // dp, sampler=sampler, drop_last=True)
    steps_per_epoch = len(loader)
    layout = "DDP" if args.ddp else f"pipeline ({pipeline.num_stages} stages on {args.pp} ranks, {args.schedule}, " \
        f"{args.microbatches} microbatches{f', FSDP2 over {dp} replicas' if dp > 1 else ''})" \
        if pipeline is not None else "FSDP2" if args.tp == 1 else f"FSDP2 x TP (dp={dp}, tp={args.tp})"
    if rank == 0:
        print(f"train_lm: {parameters / 1e6:.2f}M parameters, {len(train) / 1e6:.1f} MB of training text, "
              f"{len(heldout) / 1e3:.0f} kB held out, {world} rank(s){' with ' + layout if distributed else ''}, "
              f"{args.batch} x {args.ctx} bytes per step", flush=True)

    def save(step):
        model_state, optim_state = get_state_dict(model, optimizer)
        dcp.save({"model": model_state, "optim": optim_state, "step": step, "history": [list(h) for h in history]},
                 checkpoint_id=str(run_dir / "ckpt" / f"step_{step}"))

    step, window_start, tokens_per_step = start_step, time.monotonic(), args.batch * args.ctx
    window_losses = []  # this rank's losses since the last progress line
    bar, first_step = ProgressBar(args.steps, rank == 0), start_step
    while step < args.steps:
        sampler.set_epoch(step // steps_per_epoch)  # the data order is a function of the step: resumable
        batches = iter(loader)
        for _ in range(step % steps_per_epoch):
            next(batches)
        for batch in batches:
            for group in optimizer.param_groups:
                group["lr"] = args.lr * learning_rate(step, args)
            optimizer.zero_grad(set_to_none=True)
            if pipeline is not None:
                loss = pipeline.train_step(batch)
                pipeline.clip_grad_norm_(1.0)
            else:
                logits = model(batch[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
                loss.backward()
                loss = loss.item()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            window_losses.append(loss)
            bar.update(step, first_step, loss)
            if step % args.log_every == 0 or step == args.steps:
                # The mean over the window and the ranks: a smoother curve than one batch's loss.
                mean_loss = mean_over_ranks(sum(window_losses) / len(window_losses))
                history.append((step, mean_loss))
                elapsed = time.monotonic() - window_start
                done = len(window_losses)
                window_losses = []
                ms = 1000 * elapsed / done
                metrics.put_metric("tokens_per_s", tokens_per_step * done / elapsed, "train_lm")  # torchelastic's
                if rank == 0:
                    bar.clear()
                    print(f"step {step:5d}/{args.steps}  loss {mean_loss:.4f}  {tokens_per_step * done / elapsed:7.0f} "
                          f"tok/s  {ms:6.1f} ms/step  ETA {ms * (args.steps - step) / 1000:5.0f} s", flush=True)
                window_start = time.monotonic()
            if step % args.ckpt_every == 0 or step == args.steps:
                save(step)
            if args.stop_after is not None and step >= args.stop_after:
                if distributed:
                    dist.destroy_process_group()
                return
            if step >= args.steps:
                break

    loss = heldout_loss(logits_of, heldout, args, dp_rank, dp)
    baseline = unigram_baseline(train, heldout)
    text = sample(logits_of, b"def ", args.sample_bytes, args.ctx, args.seed, pipeline) if args.sample_bytes else ""
    if rank == 0:
        picture = plot(run_dir, history) if history else None
        (run_dir / "history.json").write_text(json.dumps(history))
        if text:
            print("sample:\n" + "\n".join("    " + line for line in text.splitlines()), flush=True)
        if picture:
            print(f"loss curve: {picture}", flush=True)
        import resource
        if not ON_TORCH:
            print(f"peak tensor memory on rank 0: {tr._C._cpu_max_memory_allocated() / 2**20:.1f} MiB", flush=True)
        print(f"peak resident memory on rank 0: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB",
              flush=True)
        print(f"held-out loss {loss:.4f} perplexity {math.exp(loss):.2f} (unigram baseline {baseline:.2f}) after "
              f"{step} steps on {world} ranks in {time.monotonic() - started:.1f} s", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
