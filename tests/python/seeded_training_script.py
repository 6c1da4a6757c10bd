"""A training script written the way PyTorch users write one, run unchanged under PyTorch and trainrun
(argv[1]: "torch" or "trainrun"): seeded, with dropout, layer norm, a transformer encoder layer, a shuffling
DataLoader (a DistributedSampler and DDP over gloo when launched on several ranks) and AdamW. Rank 0 prints
"loss <step> <value>" per step; test_seeded_training_matches_pytorch.py compares the two frameworks' lines."""
import os
import sys

if sys.argv[1] == "trainrun":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import trainrun as torch
else:
    import torch
nn = torch.nn
data = torch.utils.data
dist = torch.distributed


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(12, 16)
        self.encoder = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
        self.head = nn.Sequential(nn.LayerNorm(16), nn.Dropout(0.2), nn.Linear(16, 4))

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))


def main():
    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    features = torch.randn(64, 5, 12)
    labels = torch.randint(0, 4, (64,))
    dataset = data.TensorDataset(features, labels)
    model = Model()
    if world > 1:
        sampler = data.distributed.DistributedSampler(dataset, shuffle=True, seed=3)
        loader = data.DataLoader(dataset, batch_size=8, sampler=sampler)
        model = nn.parallel.DistributedDataParallel(model)
    else:
        loader = data.DataLoader(dataset, batch_size=8, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    step = 0
    for epoch in range(2):
        if world > 1:
            sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            mean = loss.detach().clone()
            if world > 1:  # the mean over the ranks' batches
                dist.all_reduce(mean, op=dist.ReduceOp.SUM)
                mean /= world
            if int(os.environ.get("RANK", "0")) == 0:
                print(f"loss {step} {mean.item():.6f}", flush=True)
            step += 1
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
