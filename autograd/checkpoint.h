#pragma once
// Activation checkpointing (torch.utils.checkpoint): run a function without
// keeping its activations, and recompute them during backward. Memory for
// time: the forward runs twice.
#include <functional>

#include "autograd/node.h"

namespace trainrun {

using CheckpointFunction = std::function<TensorList(const TensorList& inputs)>;

// Runs fn(inputs) without recording its graph. Outputs that need a gradient
// get one node whose backward re-runs fn (with the random generator's state
// as it was, so dropout masks repeat) and backpropagates through that.
TensorList checkpoint(const CheckpointFunction& fn, const TensorList& inputs, bool preserve_rng_state = true);

}  // namespace trainrun
