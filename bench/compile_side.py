"""One side of bench/compile.py: argv[1] is "trainrun" or "torch" (whichever torch the interpreter has), argv[2]
"eager" or "compiled" (for torch), or "all" (for trainrun: eager, compiled and compiled without fusion, timed
in turns in one process, so that the machine's drift falls on all three alike). Times the training step
(forward, backward, SGD step) of an MLP and of a transformer block, and the block's inference forward; for
compiled sides, also the first call (recording or compiling); for trainrun, the block exported and
AOT-compiled (eval mode) next to its eager eval forward. Prints RESULT lines: [variant:]name, the median
microseconds per call over rounds of 20 calls. `trainrun device cuda`: trainrun's eager and compiled training
steps on that device only (bench/compile.py --device cuda)."""
import copy
import os
import pathlib
import statistics
import sys
import time

side, mode = sys.argv[1], sys.argv[2]
if side == "trainrun":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
    import trainrun as torch
else:
    import torch
torch.set_num_threads(1)
nn = torch.nn
ROUNDS, CALLS = 15, 20


def make_step(model, x, train, compiled, fusion=True):
    first_start = time.perf_counter()
    if compiled:
        os.environ["TRAINRUN_COMPILE_FUSION"] = "1" if fusion else "0"
    run = torch.compile(model) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        if train:
            opt.zero_grad()
            run(x).pow(2).mean().backward()
            opt.step()
        else:
            with torch.no_grad():
                run(x)

    step()  # (records, for compiled: fusion is read then)
    first = (time.perf_counter() - first_start) * 1e6
    os.environ.pop("TRAINRUN_COMPILE_FUSION", None)
    for _ in range(3):
        step()
    return step, first


def timed_in_turns(steps):
    """{variant: median microseconds per call}, the variants' rounds interleaved."""
    per = {k: [] for k in steps}
    for _ in range(ROUNDS):
        for k, fn in steps.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                fn()
            per[k].append((time.perf_counter() - start) / CALLS * 1e6)
    return {k: statistics.median(v) for k, v in per.items()}


GEMMS = ("aten::mm", "aten::bmm", "aten::baddbmm", "aten::addmm", "aten::_addmm_activation")


def gemms_alone(step):
    """The matrix products one call of `step` makes (op and shapes, read from the profiler), made again on
    row-major operands of those shapes with nothing between them: the step's cost if all else were free, so
    eager / this bounds what a compiler that leaves GEMMs to the library can gain. (The step reads some
    operands transposed: within ~10% of row-major here.)"""
    from trainrun.profiler import profile
    with profile(record_shapes=True) as prof:
        step()
    calls = []
    for e in prof.events():
        if e.name not in GEMMS:
            continue
        shapes = [s for s in e.input_shapes if s]  # (baddbmm's absent self, the scalars)
        product = torch.mm if len(shapes[-1]) == 2 else torch.bmm
        bias = torch.randn(*shapes[0]) if e.name.endswith(("addmm", "addmm_activation")) else None
        a, b = torch.randn(*shapes[-2]), torch.randn(*shapes[-1])
        calls.append((lambda a=a, b=b, bias=bias: torch.addmm(bias, a, b)) if bias is not None else
                     (lambda a=a, b=b, product=product: product(a, b)))
    if not calls:
        raise RuntimeError("gemms_alone: the profiler saw no GEMM in the step")

    def run():
        for call in calls:
            call()
    return run


def case(name, model, x, train):
    variants = {"eager": (False, True)} if mode == "eager" else {"compiled": (True, True)}
    if mode == "all":
        variants = {"eager": (False, True), "compiled": (True, True), "unfused": (True, False)}
    steps, firsts = {}, {}
    for k, (compiled, fusion) in variants.items():
        steps[k], firsts[k] = make_step(copy.deepcopy(model), x, train, compiled, fusion)
    if mode == "all" and train:
        steps["gemms"] = gemms_alone(steps["compiled"])
    for k, us in timed_in_turns(steps).items():
        prefix = "" if mode != "all" else f"{k}:"
        if k == "gemms":
            print(f"RESULT compiled:{name}_gemms {us:.1f}", flush=True)
            continue
        print(f"RESULT {prefix}{name} {us:.1f}", flush=True)
        if k != "eager":
            print(f"RESULT {prefix}{name}_first {firsts[k]:.1f}", flush=True)


def device_case(device):
    """trainrun eager and compiled training steps of the MLP and the block on `device` (cuda: the fused loops as
    NVRTC-built kernels), timed in turns; a round ends when the device has finished its work."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    torch.manual_seed(0)
    models = {"mlp_train": (nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                                          nn.Linear(512, 10)), (64, 256)),
              "block_train": (nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True), (8, 64, 128))}
    for name, (model, shape) in models.items():
        model = model.to(device)
        x = torch.randn(*shape, device=device)
        steps = {}
        for variant, compiled in (("eager", False), ("compiled", True)):
            step, first = make_step(copy.deepcopy(model), x, True, compiled)
            steps[variant] = step
            if compiled:
                print(f"RESULT compiled:{name}_first {first:.1f}", flush=True)

        def timed(fn):
            def run():
                fn()
                sync()
            return run

        sync()
        for variant, us in timed_in_turns({k: timed(fn) for k, fn in steps.items()}).items():
            print(f"RESULT {variant}:{name} {us:.1f}", flush=True)


if mode == "device":  # compile_side.py trainrun device DEVICE
    device_case(sys.argv[3])
    sys.exit(0)

torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10))
block = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
case("mlp_train", mlp, torch.randn(64, 256), True)
case("block_train", block, torch.randn(8, 64, 128), True)
case("block_infer", block, torch.randn(8, 64, 128), False)

if side == "trainrun":  # the block's AOT package, loaded and called, in turns with the eager eval forward
    import tempfile
    block.eval()
    x = torch.randn(8, 64, 128)
    start = time.perf_counter()
    ep = torch.export.export(block, (x,))
    with tempfile.TemporaryDirectory() as d:
        package = torch.aot_load(torch.aot_compile(ep, d + "/block.aot"))
        first = (time.perf_counter() - start) * 1e6

        def eager_eval():
            with torch.no_grad():
                block(x)

        got = timed_in_turns({"aot": lambda: package(x), "eval": eager_eval})
    # The same with dynamic batch and sequence (recorded at a lattice of sizes), called at a size never recorded.
    batch, seq = torch.export.Dim("batch", max=64), torch.export.Dim("seq", max=512)
    start = time.perf_counter()
    ep = torch.export.export(block, (x,), dynamic_shapes=({0: batch, 1: seq},))
    with tempfile.TemporaryDirectory() as d:
        dynamic = torch.aot_load(torch.aot_compile(ep, d + "/block.aot"))
        dynamic_first = (time.perf_counter() - start) * 1e6
        other = torch.randn(5, 48, 128)

        def eager_other():
            with torch.no_grad():
                block(other)

        got.update(timed_in_turns({"dyn": lambda: dynamic(other), "eval_other": eager_other}))
    prefix = "compiled:" if mode == "all" else ""
    print(f"RESULT {prefix}block_aot_first {first:.1f}", flush=True)
    print(f"RESULT {prefix}block_aot {got['aot']:.1f}", flush=True)
    print(f"RESULT {prefix}block_eval_eager {got['eval']:.1f}", flush=True)
    print(f"RESULT {prefix}block_dyn_first {dynamic_first:.1f}", flush=True)
    print(f"RESULT {prefix}block_dyn {got['dyn']:.1f}", flush=True)
    print(f"RESULT {prefix}block_other_eager {got['eval_other']:.1f}", flush=True)
