#pragma once
// Mapping trainrun's dtypes and ReduceOps onto NCCL's, and NCCL's errors onto
// DistBackendError. Internal to c10d/nccl (includes nccl.h).
#include <nccl.h>

#include "c10d/reduce_op.h"
#include "tensor/dtype.h"

namespace trainrun {
namespace c10d {

// Throws TypeError naming `op` for a dtype NCCL cannot carry.
ncclDataType_t nccl_dtype(DType dt, const char* op);

// A reduction as NCCL runs it. PREMUL_SUM creates a communicator-bound op
// that must be destroyed after the call is enqueued (see NcclReduction).
class NcclReduction {
 public:
  // Throws TypeError for a bitwise op (NCCL has none). Bool tensors reduce
  // as uint8: SUM is logical or (MAX), PRODUCT logical and (MIN), as in PyTorch.
  NcclReduction(ReduceOp op, DType dt, ncclComm_t comm, const char* name);
  ~NcclReduction();
  NcclReduction(const NcclReduction&) = delete;
  NcclReduction& operator=(const NcclReduction&) = delete;
  ncclRedOp_t op() const { return op_; }
  // The same checks, before any communicator exists.
  static void check(ReduceOp op, DType dt, const char* name);

 private:
  ncclRedOp_t op_ = ncclSum;
  ncclComm_t comm_ = nullptr;
  bool custom_ = false;
};

// Throws DistBackendError "<what>: NCCL error <name>: <description>" (with the
// communicator's last error when there is one).
void check_nccl(ncclResult_t result, const std::string& what, ncclComm_t comm = nullptr);

}  // namespace c10d
}  // namespace trainrun
