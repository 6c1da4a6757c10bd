"""Tensor parallelism with the attention computed on DTensors, as PyTorch's current FSDP + TP example
(pytorch/examples, distributed/tensor_parallelism) writes it: q/k/v ColwiseParallel(use_local_output=False),
so the head split (view with the global head count), rotary embeddings (complex freqs_cis, made a replicated
DTensor by PrepareModuleInput), scaled_dot_product_attention and the head merge all run on DTensors sharded
over heads, and RowwiseParallel takes the merged DTensor. On 2 ranks through the launcher, loss and gradients
equal one process's."""
import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

D, HEADS, VOCAB, SEQ = 16, 4, 32, 6


def _model(torch):
    nn, F = torch.nn, torch.nn.functional

    def rotary(x, freqs_cis):
        x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        freqs = freqs_cis.view(1, x_.shape[1], 1, x_.shape[-1])
        return torch.view_as_real(x_ * freqs).flatten(3).type_as(x)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_heads, self.head_dim = HEADS, D // HEADS
            self.wq, self.wk = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
            self.wv, self.wo = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)

        def forward(self, x, freqs_cis):
            bs, seqlen, _ = x.shape
            q, k, v = (proj(x).view(bs, seqlen, self.n_heads, self.head_dim) for proj in (self.wq, self.wk, self.wv))
            q, k = rotary(q, freqs_cis), rotary(k, freqs_cis)
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                 is_causal=True)
            return self.wo(out.transpose(1, 2).contiguous().view(bs, seqlen, -1))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.attention_norm = Attention(), nn.RMSNorm(D)
            self.w1, self.w2 = nn.Linear(D, 32, bias=False), nn.Linear(32, D, bias=False)

        def forward(self, x, freqs_cis):
            h = x + self.attention(self.attention_norm(x), freqs_cis)
            return h + self.w2(F.silu(self.w1(h)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(VOCAB, D)
            self.layers = nn.ModuleList([Block() for _ in range(2)])
            self.output = nn.Linear(D, VOCAB, bias=False)
            angles = torch.outer(torch.arange(SEQ).float(), 1.0 / 10000 ** (torch.arange(0, D // HEADS, 2).float()
                                                                             / (D // HEADS)))
            self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles), persistent=False)

        def forward(self, tokens):
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h, self.freqs_cis)
            return self.output(h)
    return Net()


def dtensor_attention_matches_one_process():
    import trainrun as torch
    import trainrun.distributed as dist
    import trainrun.nn.functional as F
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import Replicate, Shard
    from trainrun.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                      parallelize_module)
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    torch.manual_seed(0)
    model, reference = _model(torch), _model(torch)
    reference.load_state_dict(model.state_dict())
    parallelize_module(model, mesh, {"tok_embeddings": RowwiseParallel(input_layouts=Replicate()),
                                     "output": ColwiseParallel(output_layouts=Replicate())})
    for block in model.layers:
        parallelize_module(block, mesh, {
            "attention": PrepareModuleInput(input_layouts=(Replicate(), Replicate()),
                                            desired_input_layouts=(Replicate(), Replicate())),
            "attention.wq": ColwiseParallel(use_local_output=False),
            "attention.wk": ColwiseParallel(use_local_output=False),
            "attention.wv": ColwiseParallel(use_local_output=False),
            "attention.wo": RowwiseParallel(),
            "w1": ColwiseParallel(), "w2": RowwiseParallel()})
    tokens = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))
    labels = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(2))
    loss = F.cross_entropy(model(tokens).flatten(0, 1), labels.flatten(0, 1))
    loss.backward()
    expected = F.cross_entropy(reference(tokens).flatten(0, 1), labels.flatten(0, 1))
    expected.backward()
    assert abs(float(loss) - float(expected)) < 1e-5, (float(loss), float(expected))
    for name in ("layers.0.attention.wq.weight", "layers.0.attention.wk.weight", "layers.1.attention.wv.weight",
                 "layers.1.attention.wo.weight", "layers.0.attention_norm.weight", "tok_embeddings.weight"):
        ours, theirs = model.get_parameter(name).grad, reference.get_parameter(name).grad
        ours = ours.full_tensor() if hasattr(ours, "full_tensor") else ours
        assert torch.allclose(ours, theirs, atol=1e-5), name
    dist.destroy_process_group()


def test_dtensor_attention_on_two_ranks(ranks):
    ranks.run_function(2, dtensor_attention_matches_one_process)
