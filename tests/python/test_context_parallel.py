"""context_parallel on 2 ranks through the launcher: a causal attention model trained on each rank's part of the
sequence (PyTorch's load-balanced layout) gives, after averaging the gradients over the ranks, the loss and the
gradients of one process on the whole sequence; context_parallel_unshard gives the whole output; the buffers
come back whole; non-causal attention and the sequential layout agree too."""
import datetime

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


class Attention(torch.nn.Module):
    def __init__(self, dim=8, heads=2, causal=True):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv, self.out = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


def _reference(model, x, target):
    out = model(x)
    loss = torch.nn.functional.mse_loss(out, target)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    return out.detach(), loss.detach(), grads


def context_parallel_equals_one_process():
    import pytest
    from trainrun import distributed as dist
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor.experimental import context_parallel
    from trainrun.distributed.tensor.experimental import _attention
    from trainrun.distributed.tensor.experimental._attention import context_parallel_unshard
    mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("cp",))
    for causal, balanced in ((True, True), (False, True), (True, False)):
        _attention._cp_options.enable_load_balance = balanced
        torch.manual_seed(0)
        model = Attention(causal=causal)
        x, target = torch.randn(2, 8, 8), torch.randn(2, 8, 8)
        whole_out, whole_loss, whole_grads = _reference(model, x, target)
        inputs, labels = x.clone(), target.clone()
        with context_parallel(mesh, buffers=[inputs, labels], buffer_seq_dims=[1, 1]):
            assert inputs.shape == (2, 4, 8)
            out = model(inputs)
            loss = torch.nn.functional.mse_loss(out, labels)
            grads = torch.autograd.grad(loss, list(model.parameters()))
            (full,) = context_parallel_unshard(mesh, [out.detach()], [1])
        assert inputs.shape == (2, 8, 8) and torch.equal(inputs, x), "the buffers come back whole"
        assert torch.allclose(full, whole_out, atol=1e-5), (causal, balanced)
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
        assert torch.allclose(mean_loss, whole_loss, atol=1e-6)
        for g, expected in zip(grads, whole_grads):
            g = g.clone()
            dist.all_reduce(g, op=dist.ReduceOp.AVG)
            assert torch.allclose(g, expected, atol=1e-5), (causal, balanced)
    _attention._cp_options.enable_load_balance = True
    kept = torch.randn(1, 8)
    with context_parallel(mesh, buffers=[kept], buffer_seq_dims=[1], no_restore_buffers={kept}):
        pass
    assert kept.shape == (1, 4)
    with pytest.raises(ValueError, match="not a multiple of 4"):
        with context_parallel(mesh, buffers=[torch.ones(1, 6)], buffer_seq_dims=[1]):
            pass
    with pytest.raises(NotImplementedError, match="does not support using ring"):
        _attention.set_rotate_method("ring")
    dist.destroy_process_group()


def test_context_parallel_equals_one_process(ranks):
    ranks.run_function(2, context_parallel_equals_one_process)
