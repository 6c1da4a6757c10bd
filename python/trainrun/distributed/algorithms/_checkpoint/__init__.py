"""torch.distributed.algorithms._checkpoint: activation checkpointing as a module wrapper."""
