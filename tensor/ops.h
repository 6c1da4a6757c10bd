#pragma once
// Everything the tensor core offers, in one include.
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/fused_optim.h"
#include "tensor/indexing.h"
#include "tensor/linalg.h"
#include "tensor/nn_functional.h"
#include "tensor/reductions.h"
#include "tensor/tensor.h"
#include "tensor/thread_pool.h"
#include "tensor/safetensors.h"
#include "tensor/dlpack.h"
#include "tensor/views.h"
