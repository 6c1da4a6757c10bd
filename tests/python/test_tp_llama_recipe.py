"""The tensor-parallel Llama recipe of PyTorch's TP tutorial, on 2 ranks through the launcher: embedding
RowwiseParallel to a sequence shard, SequenceParallel norms, PrepareModuleInput with a None entry (freqs_cis),
colwise q/k/v and FFN in, rowwise out to Shard(1), a colwise output kept as a DTensor for loss_parallel, then
fully_shard over the (here 1-rank) dp mesh of the same 2-D mesh. Loss and gradients equal one process's; the
norms' gradients (replicated parameters on sequence shards) are summed over the TP group, which here is the
whole world."""
import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

D, HEADS, VOCAB, SEQ = 16, 4, 32, 6


def _llama(torch):
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_heads, self.head_dim = HEADS, D // HEADS
            self.wq, self.wk = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
            self.wv, self.wo = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)

        def forward(self, x, freqs_cis):
            bs, seqlen, _ = x.shape
            q, k, v = (proj(x).view(bs, seqlen, -1, self.head_dim).transpose(1, 2)
                       for proj in (self.wq, self.wk, self.wv))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(out.transpose(1, 2).contiguous().view(bs, seqlen, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w2, self.w3 = nn.Linear(D, 32, bias=False), nn.Linear(32, D, bias=False), \
                nn.Linear(D, 32, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.feed_forward = Attention(), FeedForward()
            self.attention_norm, self.ffn_norm = nn.RMSNorm(D), nn.RMSNorm(D)

        def forward(self, x, freqs_cis):
            h = x + self.attention(self.attention_norm(x), freqs_cis)
            return h + self.feed_forward(self.ffn_norm(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(VOCAB, D)
            self.layers = nn.ModuleList([Block() for _ in range(2)])
            self.norm, self.output = nn.RMSNorm(D), nn.Linear(D, VOCAB, bias=False)
            self.register_buffer("freqs_cis", torch.ones(SEQ, D // HEADS // 2), persistent=False)

        def forward(self, tokens):
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h, self.freqs_cis)
            return self.output(self.norm(h))
    return Llama()


def llama_tp_and_fsdp_match_one_process():
    import trainrun as torch
    import trainrun.distributed as dist
    import trainrun.nn.functional as F
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.fsdp import fully_shard
    from trainrun.distributed.tensor import DTensor, Replicate, Shard
    from trainrun.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                      SequenceParallel, loss_parallel, parallelize_module)
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (1, dist.get_world_size()), mesh_dim_names=("dp", "tp"))
    tp_mesh, dp_mesh = mesh["tp"], mesh["dp"]
    torch.manual_seed(0)
    model, reference = _llama(torch), _llama(torch)
    reference.load_state_dict(model.state_dict())
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False)})
    for block in model.layers:
        block.attention.n_heads = HEADS // tp_mesh.size()
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
            "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1))})
        fully_shard(block, mesh=dp_mesh)
    fully_shard(model, mesh=dp_mesh)
    tokens = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))
    labels = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(2))
    out = model(tokens)
    assert isinstance(out, DTensor) and out.placements == (Shard(2),), out.placements
    with loss_parallel():
        loss = F.cross_entropy(out.flatten(0, 1), labels.flatten(0, 1))
        loss.backward()
    expected = F.cross_entropy(reference(tokens).flatten(0, 1), labels.flatten(0, 1))
    expected.backward()
    assert abs(float(loss.full_tensor() if isinstance(loss, DTensor) else loss) - float(expected)) < 1e-4
    for name in ("layers.0.attention.wq.weight", "tok_embeddings.weight", "layers.0.attention_norm.weight",
                 "layers.1.ffn_norm.weight", "norm.weight", "output.weight"):
        ours, theirs = model.get_parameter(name).grad, reference.get_parameter(name).grad
        assert torch.allclose(ours.full_tensor(), theirs, atol=1e-4), name
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    dist.destroy_process_group()


def test_llama_recipe_on_two_ranks(ranks):
    ranks.run_function(2, llama_tp_and_fsdp_match_one_process)
