"""nn.SyncBatchNorm: on 2 ranks (through the launcher), each holding half of a batch, the outputs, the input
gradients, the summed weight gradients and the running statistics equal single-process BatchNorm2d's on the whole
batch; in one process it is BatchNorm2d; convert_sync_batchnorm swaps every BatchNorm layer keeping its state."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


def _models():
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=0.2), nn.ReLU())
    synced = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=0.2), nn.ReLU())
    synced.load_state_dict(reference.state_dict())
    return reference, nn.SyncBatchNorm.convert_sync_batchnorm(synced)


def _close(a, b, atol=1e-5):
    return torch.allclose(a, b, atol=atol, rtol=1e-4)


def two_ranks_equal_one_process():
    from trainrun import distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    reference, synced = _models()
    torch.manual_seed(1)
    batch = torch.randn(6, 3, 8, 8)
    whole = batch.clone().requires_grad_()
    mine = batch[rank * 3:(rank + 1) * 3].clone().requires_grad_()
    out_whole, out_mine = reference(whole), synced(mine)
    assert _close(out_mine, out_whole[rank * 3:(rank + 1) * 3]), "outputs"
    out_whole.pow(2).sum().backward()
    out_mine.pow(2).sum().backward()
    assert _close(mine.grad, whole.grad[rank * 3:(rank + 1) * 3], atol=1e-4), "input gradients"
    weight_grad = synced[1].weight.grad.clone()
    dist.all_reduce(weight_grad)
    assert _close(weight_grad, reference[1].weight.grad, atol=1e-3), "weight gradients summed over ranks"
    assert _close(synced[1].running_mean, reference[1].running_mean), "running mean"
    assert _close(synced[1].running_var, reference[1].running_var), "running variance"
    synced.eval()
    reference.eval()
    assert _close(synced(batch), reference(batch)), "eval uses the running statistics"
    dist.destroy_process_group()


def test_sync_batch_norm_on_two_ranks_equals_batch_norm_on_the_whole_batch(ranks):
    ranks.run_function(2, two_ranks_equal_one_process)


def test_one_process_and_conversion():
    reference, synced = _models()
    assert type(synced[1]).__name__ == "SyncBatchNorm" and "momentum=0.2" in repr(synced[1])
    assert list(synced.state_dict()) == list(reference.state_dict())
    x = torch.randn(4, 3, 6, 6, requires_grad=True)
    y = x.detach().clone().requires_grad_()
    a, b = synced(x), reference(y)
    assert _close(a, b)
    a.pow(2).sum().backward()
    b.pow(2).sum().backward()
    assert _close(x.grad, y.grad, atol=1e-4) and _close(synced[1].bias.grad, reference[1].bias.grad, atol=1e-3)
    assert synced[1].num_batches_tracked.item() == 1
    with pytest.raises(ValueError, match="expected 4 channels"):
        synced[1](torch.randn(2, 3, 4, 4))
    lone = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm1d(5, eps=1e-3))
    assert isinstance(lone, nn.SyncBatchNorm) and lone.eps == 1e-3
