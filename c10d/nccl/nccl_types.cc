#include "c10d/nccl/nccl_types.h"

#include "base/error.h"
#include "tensor/half.h"

namespace trainrun {
namespace c10d {

ncclDataType_t nccl_dtype(DType dt, const char* op) {
  switch (dt) {
    case DType::Bool: return ncclUint8;
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::Int16: break;  // (NCCL has no 16-bit integer type; PyTorch's NCCL refuses int16 too)
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
  }
  throw TypeError(fmt::format("{}: NCCL cannot carry dtype {}", op, dtype_name(dt)));
}

NcclReduction::NcclReduction(ReduceOp op, DType dt, ncclComm_t comm, const char* name) {
  check(op, dt, name);
  const bool is_bool = dt == DType::Bool;
  switch (op.kind) {
    case ReduceOp::SUM: op_ = is_bool ? ncclMax : ncclSum; break;
    case ReduceOp::PRODUCT: op_ = is_bool ? ncclMin : ncclProd; break;
    case ReduceOp::MIN: op_ = ncclMin; break;
    case ReduceOp::MAX: op_ = ncclMax; break;
    case ReduceOp::AVG: op_ = ncclAvg; break;
    case ReduceOp::PREMUL_SUM: {
      // The factor in the tensor's own type, read by NCCL from host memory now.
      union { float f; double d; uint16_t h; } scalar{};
      if (dt == DType::Float32) scalar.f = static_cast<float>(op.factor);
      else if (dt == DType::Float64) scalar.d = op.factor;
      else if (dt == DType::Float16) scalar.h = Half(static_cast<float>(op.factor)).bits;
      else scalar.h = BFloat16(static_cast<float>(op.factor)).bits;
      check_nccl(ncclRedOpCreatePreMulSum(&op_, &scalar, nccl_dtype(dt, name), ncclScalarHostImmediate, comm),
                 std::string(name) + ": creating PREMUL_SUM", comm);
      comm_ = comm;
      custom_ = true;
      break;
    }
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      break;  // refused by check()
  }
}

void NcclReduction::check(ReduceOp op, DType dt, const char* name) {
  nccl_dtype(dt, name);
  TR_CHECK(op.kind != ReduceOp::BAND && op.kind != ReduceOp::BOR && op.kind != ReduceOp::BXOR, TypeError,
           "{}: ReduceOp {} is not supported by NCCL (it has no bitwise reductions; use gloo)", name, op.name());
  TR_CHECK(op.kind != ReduceOp::AVG || dt != DType::Bool, TypeError, "{}: AVG of bool tensors is not defined", name);
  TR_CHECK(op.kind != ReduceOp::PREMUL_SUM || is_floating(dt), TypeError,
           "{}: PREMUL_SUM needs a floating dtype, got {}", name, dtype_name(dt));
}

NcclReduction::~NcclReduction() {
  if (custom_) ncclRedOpDestroy(op_, comm_);
}

void check_nccl(ncclResult_t result, const std::string& what, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  std::string detail = ncclGetErrorString(result);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') detail += fmt::format(" ({})", last);
  }
  throw DistBackendError(fmt::format("{}: NCCL error {}: {}", what, static_cast<int>(result), detail));
}

}  // namespace c10d
}  // namespace trainrun
