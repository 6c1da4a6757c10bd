"""The main job: a digits classifier trained with DistributedDataParallel on
every rank `trainrun` starts.

    trainrun --nproc-per-node 2 examples/train_digits.py [--epochs 30] [--device cuda]

The data are the 8x8 handwritten digits (1,797 images) that Debian's
python3-sklearn ships as a CSV file; 20% are held out. Each rank trains on
its shard of the training split, reshuffled every epoch the same way on
every rank (as DistributedSampler does); DDP averages the gradients. Rank 0
prints the loss and held-out accuracy, saves a checkpoint (safetensors: no
pickle), and every rank checks that a fresh model loaded from it scores the
same. With --device cuda each rank trains on GPU LOCAL_RANK and DDP
all-reduces over NCCL.
"""
import argparse
import gzip
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
from trainrun import nn  # noqa: E402
from trainrun.distributed.elastic import record  # noqa: E402

DIGITS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def load_digits(path=DIGITS):
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",", dtype=np.float32)
    return data[:, :64] / 16.0, data[:, 64].astype(np.int64)


class Classifier(nn.Module):
    def __init__(self, dropout=0.1):
        super().__init__()
        self.hidden = nn.Linear(64, 128)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(128, 10)

    def forward(self, x):
        return self.out(self.dropout(tr.relu(self.hidden(x))))


def accuracy(model, x, y):
    with tr.no_grad():
        model.eval()
        predicted = model(x).argmax(1)
        model.train()
    return (predicted == y).float().mean().item()


@record
def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--data", default=DIGITS, help="the digits CSV (gzip), as python3-sklearn ships it")
    parser.add_argument("--dropout", type=float, default=0.1,
                        help="the hidden layer's dropout (its masks are the device's draws: CPU and CUDA differ)")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.device == "cuda":
        tr.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = tr.device("cuda", tr.cuda.current_device())
    else:
        device = tr.device("cpu")
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    images, labels = load_digits(args.data)
    order = np.random.default_rng(0).permutation(len(labels))  # the same split on every rank
    n_test = len(labels) // 5
    test, train = order[:n_test], order[n_test:]
    train_x, train_y = tr.from_numpy(images[train].copy()).to(device), tr.from_numpy(labels[train].copy()).to(device)
    test_x, test_y = tr.from_numpy(images[test].copy()).to(device), tr.from_numpy(labels[test].copy()).to(device)
    if rank == 0:
        print(f"digits: {len(train)} training and {n_test} held-out images, {world} ranks on {device.type}", flush=True)

    tr.manual_seed(1 + rank)  # different on purpose: DDP starts every rank from rank 0's weights
    net = Classifier(args.dropout).to(device)
    model = nn.parallel.DistributedDataParallel(net)
    opt = tr.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    batch = 32
    for epoch in range(args.epochs):
        mine = np.random.default_rng(100 + epoch).permutation(len(train))[rank::world]
        losses = []
        for b in range(0, len(mine) - batch + 1, batch):
            idx = tr.from_numpy(mine[b:b + batch].copy()).to(device)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(tr.index_select(train_x, 0, idx)),
                                               tr.index_select(train_y, 0, idx))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        stats = tr.tensor([sum(losses), float(len(losses))], dtype=tr.float64).to(device)
        dist.all_reduce(stats)
        if rank == 0 and (epoch == 0 or epoch % 5 == 4 or epoch == args.epochs - 1):
            print(f"epoch {epoch + 1:2d}  loss {stats[0].item() / stats[1].item():.4f}  "
                  f"held-out accuracy {accuracy(net, test_x, test_y):.4f}", flush=True)
    final = accuracy(net, test_x, test_y)

    checkpoint = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / \
        f"trainrun_digits_py_{os.environ.get('TRAINRUN_RUN_ID', 'local')}.safetensors"
    if rank == 0:
        tr.save(net.state_dict(), str(checkpoint))
    dist.barrier()
    fresh = Classifier(args.dropout)
    fresh.load_state_dict(tr.load(str(checkpoint)))
    fresh.to(device)
    reloaded = accuracy(fresh, test_x, test_y)
    if reloaded != final:
        raise RuntimeError(f"the reloaded checkpoint scores {reloaded} but the trained model {final}")
    dist.barrier()
    if rank == 0:
        checkpoint.unlink()
        print(f"held-out accuracy {final:.4f} after {args.epochs} epochs on {world} ranks in "
              f"{time.perf_counter() - start:.1f} s; checkpoint reloaded: {reloaded:.4f}", flush=True)
        if final < 0.95:
            raise RuntimeError(f"held-out accuracy {final} is below the 0.95 this job promises")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
