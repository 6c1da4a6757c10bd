"""PyTorch's memory formats and the surface around them: torch.contiguous_format / channels_last /
channels_last_3d / preserve_format, `memory_format=` on Tensor.contiguous, is_contiguous, clone, to, torch.empty
and the *_like factories (strides as PyTorch 1.13 gives them), Tensor.stride(dim), and Module.to's forms (device,
dtype, both, a tensor, keywords, memory_format)."""
import pickle

import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402


def test_channels_last_strides_values_and_gradients():
    x = torch.randn(2, 3, 4, 5)
    last = x.contiguous(memory_format=torch.channels_last)
    assert last.stride() == (60, 1, 15, 3) and torch.equal(last, x)
    assert last.is_contiguous(memory_format=torch.channels_last) and not last.is_contiguous()
    assert x.is_contiguous(memory_format=torch.contiguous_format) and not x.is_contiguous(
        memory_format=torch.channels_last)
    assert last.contiguous(memory_format=torch.channels_last) is last, "already in that layout: itself"
    assert last.contiguous().stride() == (60, 20, 5, 1)
    cube = torch.randn(2, 3, 4, 5, 6).contiguous(memory_format=torch.channels_last_3d)
    assert cube.stride() == (360, 1, 90, 18, 3)
    w = torch.randn(2, 3, 4, 5, requires_grad=True)
    scale = torch.arange(120.0).view(2, 3, 4, 5)
    (w.contiguous(memory_format=torch.channels_last) * scale).sum().backward()
    assert torch.equal(w.grad, scale)


def test_clone_to_and_factories_follow_the_format():
    x = torch.randn(2, 3, 4, 5)
    last = x.to(memory_format=torch.channels_last)
    assert last.stride() == (60, 1, 15, 3)
    assert last.clone().stride() == (60, 1, 15, 3), "clone's preserve_format keeps channels_last"
    assert torch.clone(last, memory_format=torch.contiguous_format).stride() == (60, 20, 5, 1)
    assert x.clone(memory_format=torch.channels_last).stride() == (60, 1, 15, 3)
    for like in (torch.empty_like, torch.zeros_like, torch.ones_like, torch.rand_like, torch.randn_like):
        assert like(last).stride() == (60, 1, 15, 3), like.__name__
        assert like(last, memory_format=torch.contiguous_format).stride() == (60, 20, 5, 1), like.__name__
    assert torch.full_like(last, 7.0).stride() == (60, 1, 15, 3)
    assert torch.zeros_like(last).sum().item() == 0 and torch.ones_like(last).sum().item() == 120
    assert torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride() == (60, 1, 15, 3)
    as_double = last.to(torch.float64, memory_format=torch.preserve_format)
    assert as_double.dtype == torch.float64 and as_double.stride() == (60, 1, 15, 3)


def test_a_convolution_gives_the_same_result_in_either_layout():
    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4))
    x = torch.randn(2, 3, 8, 8)
    want = conv(x)
    assert conv.to(memory_format=torch.channels_last) is conv
    assert torch.allclose(conv(x.contiguous(memory_format=torch.channels_last)), want, atol=1e-6)


def test_formats_print_pickle_and_refuse_wrong_ranks():
    assert repr(torch.channels_last) == "torch.channels_last" and isinstance(torch.preserve_format,
                                                                              torch.memory_format)
    assert pickle.loads(pickle.dumps(torch.channels_last)) is torch.channels_last
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last"):
        torch.randn(2, 3).contiguous(memory_format=torch.channels_last)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        torch.randn(2, 3).contiguous(memory_format=torch.preserve_format)
    with pytest.raises(TypeError, match="memory_format"):
        torch.randn(2, 3).clone(memory_format="channels_last")


def test_stride_of_one_dim():
    x = torch.randn(2, 3, 4)
    assert (x.stride(0), x.stride(1), x.stride(-1)) == (12, 4, 1)
    with pytest.raises(IndexError, match="stride: dim 3 is out of range"):
        x.stride(3)


def test_module_to_takes_pytorchs_forms():
    model = torch.nn.Linear(2, 2)
    assert model.to(dtype=torch.float64) is model and model.weight.dtype == torch.float64
    assert model.to("cpu", torch.float32).weight.dtype == torch.float32
    assert model.to(device="cpu", non_blocking=True).weight.device.type == "cpu"
    assert model.to(torch.zeros(1, dtype=torch.float64)).weight.dtype == torch.float64
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        model.to(torch.int64)
    with pytest.raises(TypeError, match="memory_format must be a torch.memory_format"):
        model.to(memory_format="nhwc")


@needs_torch
def test_strides_match_pytorch():
    shape = (2, 3, 4, 5)
    for ours, theirs in ((torch.channels_last, peer.channels_last), (torch.contiguous_format,
                                                                      peer.contiguous_format)):
        assert torch.randn(*shape).contiguous(memory_format=ours).stride() == \
            peer.randn(*shape).contiguous(memory_format=theirs).stride()
    odd = (1, 3, 1, 5)  # dims of size 1: any stride counts as contiguous in either format, as in PyTorch
    assert torch.randn(*odd).is_contiguous(memory_format=torch.channels_last) == \
        peer.randn(*odd).is_contiguous(memory_format=peer.channels_last)
    assert torch.randn(2, 3, 4, 5, 6).contiguous(memory_format=torch.channels_last_3d).stride() == \
        peer.randn(2, 3, 4, 5, 6).contiguous(memory_format=peer.channels_last_3d).stride()
