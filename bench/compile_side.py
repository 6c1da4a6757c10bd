"""One side of bench/compile.py: argv[1] is "trainrun" or "torch" (whichever torch the interpreter has), argv[2]
"eager" or "compiled". Times the training step (forward, backward, SGD step) of an MLP and of a transformer
block, and the block's inference forward; for "compiled", also the first call (recording or compiling).
Prints RESULT lines: name, median microseconds over 5 rounds of 50 calls."""
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


def timed(fn, rounds=5, calls=50):
    per = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(per)


def case(name, model, x, train):
    first_start = time.perf_counter()
    run = torch.compile(model) if mode == "compiled" else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        if train:
            opt.zero_grad()
            run(x).pow(2).mean().backward()
            opt.step()
        else:
            with torch.no_grad():
                run(x)

    step()
    first = (time.perf_counter() - first_start) * 1e6
    for _ in range(5):
        step()
    print(f"RESULT {name} {timed(step):.1f}", flush=True)
    if mode == "compiled":
        print(f"RESULT {name}_first {first:.1f}", flush=True)


torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10))
block = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
case("mlp_train", mlp, torch.randn(64, 256), True)
case("block_train", block, torch.randn(8, 64, 128), True)
case("block_infer", block, torch.randn(8, 64, 128), False)
