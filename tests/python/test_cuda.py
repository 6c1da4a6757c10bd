"""trainrun.cuda and CUDA tensors from Python. Without a GPU: availability
is reported with the reason, and every CUDA entry point raises RuntimeError
saying why; devices parse and compare as in PyTorch. With a GPU: ops,
streams, events, memory statistics and pinned copies against the CPU."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
if not (ROOT / "bazel-bin" / "python" / "trainrun" / "_C.so").exists():
    pytest.skip("trainrun._C is not built (bazel build //python:trainrun/_C.so)", allow_module_level=True)

import trainrun  # noqa: E402
from trainrun import cuda  # noqa: E402

needs_gpu = pytest.mark.skipif(not cuda.is_available(), reason=f"needs a GPU: {cuda.unavailable_reason()}")
no_gpu = pytest.mark.skipif(cuda.is_available(), reason="a GPU is present: the no-GPU paths do not apply")


def test_devices_parse_print_and_compare():
    d = trainrun.device("cuda:1")
    assert (d.type, d.index, str(d), repr(d)) == ("cuda", 1, "cuda:1", "device(type='cuda', index=1)")
    assert trainrun.device("cpu") == "cpu" and trainrun.device("cuda", 0) == trainrun.device("cuda:0")
    assert trainrun.device("cuda").index is None
    with pytest.raises(ValueError, match="invalid device string 'gpu'"):
        trainrun.device("gpu")
    # As PyTorch's constructor: a device (a copy), an int (a CUDA index); a bad index is refused by name.
    assert trainrun.device(trainrun.device("cuda", 2)) == "cuda:2" and trainrun.device(1) == "cuda:1"
    with pytest.raises(ValueError, match="device index must not be negative, got -1"):
        trainrun.device("cuda", -1)
    with pytest.raises(ValueError, match="must not include an index because index was passed explicitly: cpu:0"):
        trainrun.device("cpu:0", 1)
    x = trainrun.ones([2, 3])
    assert x.device == "cpu" and not x.is_cuda
    assert x.to("cpu") is x and x.cpu().device == "cpu"
    assert x.to(trainrun.float64).dtype == trainrun.float64
    assert x.to("cpu", trainrun.int64).dtype == trainrun.int64
    assert trainrun.zeros_like(x).device == x.device


@no_gpu
def test_without_a_gpu_every_entry_point_says_why():
    assert not cuda.is_available() and cuda.device_count() == 0
    reason = cuda.unavailable_reason()
    assert "CUDA is not available" in reason
    x = trainrun.ones([3])
    for make in (lambda: x.cuda(), lambda: x.to("cuda"), lambda: trainrun.zeros([2], device="cuda"),
                 lambda: trainrun.randn([2], device="cuda:0"), lambda: cuda.current_stream(), lambda: cuda.Stream(),
                 lambda: cuda.memory_allocated(), lambda: x.pin_memory(), lambda: trainrun.nn.Linear(2, 2).cuda()):
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            make()
    assert not x.is_pinned()
    cuda.empty_cache()  # nothing to free; fine


def test_nccl_backend_is_available_and_refuses_cpu_tensors(tmp_path):
    import trainrun.distributed as dist
    assert dist.is_nccl_available()
    dist.init_process_group("nccl", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        with pytest.raises(TypeError, match="expected CUDA tensors.*gloo"):
            dist.all_reduce(trainrun.ones([4]))
    finally:
        dist.destroy_process_group()


@needs_gpu
def test_ops_on_the_gpu_match_the_cpu():
    trainrun.manual_seed(0)
    a, b = trainrun.randn([64, 32]), trainrun.randn([32, 16])
    ga, gb = a.cuda(), b.cuda()
    assert ga.is_cuda and ga.device == "cuda:0"
    prod_gpu, prod_cpu = (ga @ gb).cpu().tolist(), (a @ b).tolist()
    assert max(abs(x - y) for r1, r2 in zip(prod_gpu, prod_cpu) for x, y in zip(r1, r2)) < 1e-3
    got = trainrun.softmax(ga @ gb, -1).cpu().tolist()
    want = trainrun.softmax(a @ b, -1).tolist()
    assert max(abs(x - y) for r1, r2 in zip(got, want) for x, y in zip(r1, r2)) < 1e-5
    assert abs((ga.sum()).item() - a.sum().item()) < 1e-3
    assert "device='cuda:0'" in repr(ga)


@needs_gpu
def test_streams_events_memory_and_pinned_copies():
    s = cuda.Stream()
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    with cuda.stream(s):
        assert cuda.current_stream() == s
        start.record()
        x = trainrun.ones([1 << 20], device="cuda")
        y = x * 3
        end.record()
    cuda.current_stream().wait_stream(s)
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    assert y[0].item() == 3
    assert cuda.memory_allocated() >= 4 << 20
    stats = cuda.memory_stats()
    assert stats["num_device_alloc"] >= 1 and stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"]
    host = trainrun.arange(1000, dtype=trainrun.float32).pin_memory()
    assert host.is_pinned()
    dev = host.to("cuda", non_blocking=True)
    cuda.synchronize()
    assert dev.cpu().tolist() == host.tolist()
    with pytest.raises(cuda.OutOfMemoryError, match="CUDA out of memory"):
        trainrun.empty([1 << 45], dtype=trainrun.uint8, device="cuda")


@needs_gpu
def test_main_job_on_one_gpu_follows_the_cpu_run():
    """The main job with --device cuda (DDP over NCCL, one rank): without
    dropout it follows the CPU run epoch by epoch (same weights, same batches;
    cuBLAS and OpenBLAS add in other orders, so the losses agree to float32
    rounding carried over the epochs, and the held-out accuracies to an image);
    with dropout, whose masks are each device's own draws (the CPU's Mersenne
    Twister, the GPU's Philox, as in PyTorch), it learns as well."""
    import os
    import subprocess
    data = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
    data = os.environ.get("TRAINRUN_DIGITS", data)
    if not pathlib.Path(data).exists():
        pytest.skip(f"no digits data at {data} (python3-sklearn; or set TRAINRUN_DIGITS)")
    env = dict(os.environ, TRAINRUN_PYTHON=sys.executable)
    runs = {}
    for device, dropout in (("cuda", "0"), ("cpu", "0"), ("cuda", "0.1")):
        r = subprocess.run([str(ROOT / "bazel-bin" / "launcher" / "trainrun"), "--nproc-per-node", "1",
                            str(ROOT / "examples" / "train_digits.py"), "--epochs", "10", "--device", device,
                            "--dropout", dropout, "--data", data], capture_output=True, text=True, timeout=180,
                           env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        runs[device, dropout] = [line for line in r.stdout.splitlines() if line.startswith("[rank0]:epoch")]
    assert len(runs["cuda", "0"]) == 3 and len(runs["cpu", "0"]) == 3, runs
    # Each line reads "[rank0]:epoch N  loss L  held-out accuracy A".
    for gpu_line, cpu_line in zip(runs["cuda", "0"], runs["cpu", "0"]):
        gpu_loss, cpu_loss = float(gpu_line.split()[3]), float(cpu_line.split()[3])
        assert gpu_line.split()[1] == cpu_line.split()[1] and abs(gpu_loss - cpu_loss) <= 2e-3 * cpu_loss + 2e-4, runs
        assert abs(float(gpu_line.split()[-1]) - float(cpu_line.split()[-1])) <= 1.5 / 360, runs  # 360 held out
    last = runs["cuda", "0.1"][-1]
    assert last.startswith("[rank0]:epoch 10") and float(last.split()[-1]) >= 0.95, runs["cuda", "0.1"]


@needs_gpu
def test_data_loader_pins_batches_when_asked():
    from trainrun.utils.data import DataLoader, TensorDataset
    ds = TensorDataset(trainrun.arange(8).float(), trainrun.arange(8))
    pinned = list(DataLoader(ds, batch_size=4, pin_memory=True))
    plain = list(DataLoader(ds, batch_size=4))
    assert all(t.is_pinned() for batch in pinned for t in batch)
    assert not any(t.is_pinned() for batch in plain for t in batch)
    assert [t.tolist() for b in pinned for t in b] == [t.tolist() for b in plain for t in b]
