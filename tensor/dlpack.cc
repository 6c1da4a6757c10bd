#include "tensor/dlpack.h"

#include "tensor/factories.h"

namespace trainrun {
namespace {

// DLPack >= 0.8 has kDLBool = 6; Debian's 0.6 header predates it.
constexpr uint8_t kDLBoolCode = 6;

DLDataType to_dl_dtype(DType t) {
  DLDataType d;
  d.lanes = 1;
  d.bits = static_cast<uint8_t>(element_size(t) * 8);
  switch (t) {
    case DType::Bool: d.code = kDLBoolCode; break;
    case DType::UInt8: d.code = kDLUInt; break;
    case DType::Int8: case DType::Int16: case DType::Int32: case DType::Int64: d.code = kDLInt; break;
    case DType::BFloat16: d.code = kDLBfloat; break;
    default: d.code = kDLFloat; break;
  }
  return d;
}

DType from_dl_dtype(DLDataType d) {
  TR_CHECK(d.lanes == 1, TypeError, "from_dlpack: vector dtypes (lanes={}) are not supported", d.lanes);
  switch (d.code) {
    case kDLBoolCode: if (d.bits == 8) return DType::Bool; break;
    case kDLUInt: if (d.bits == 8) return DType::UInt8; break;
    case kDLInt:
      if (d.bits == 8) return DType::Int8;
      if (d.bits == 16) return DType::Int16;
      if (d.bits == 32) return DType::Int32;
      if (d.bits == 64) return DType::Int64;
      break;
    case kDLFloat:
      if (d.bits == 16) return DType::Float16;
      if (d.bits == 32) return DType::Float32;
      if (d.bits == 64) return DType::Float64;
      break;
    case kDLBfloat: if (d.bits == 16) return DType::BFloat16; break;
    default: break;
  }
  throw TypeError(fmt::format("from_dlpack: unsupported DLPack dtype (code {}, {} bits)", d.code, d.bits));
}

// What a DLManagedTensor we produce owns: a reference to the tensor and the
// shape/stride arrays DLTensor points at.
struct DLPackExport {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed;
};

}  // namespace

DLManagedTensor* to_dlpack(const Tensor& t) {
  auto* ctx = new DLPackExport{t, t.sizes(), t.strides(), {}};
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = t.impl()->storage()->data();  // the base; byte_offset locates element 0
  dl.byte_offset = static_cast<uint64_t>(t.storage_offset() * t.element_size());
  dl.device = DLDevice{t.device().is_cuda() ? kDLCUDA : kDLCPU, std::max<int32_t>(t.device().index, 0)};
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = to_dl_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DLPackExport*>(self->manager_ctx); };
  return &ctx->managed;
}

Tensor from_dlpack(DLManagedTensor* managed) {
  TR_CHECK(managed != nullptr, ValueError, "from_dlpack: null DLManagedTensor");
  const DLTensor& dl = managed->dl_tensor;
  TR_CHECK(dl.device.device_type == kDLCPU || dl.device.device_type == kDLCUDA, TypeError,
           "from_dlpack: unsupported device type {}", static_cast<int>(dl.device.device_type));
  DType dtype = from_dl_dtype(dl.dtype);
  IntList sizes(dl.shape, dl.shape + dl.ndim);
  IntList strides = dl.strides ? IntList(dl.strides, dl.strides + dl.ndim) : contiguous_strides(sizes);
  Device device = dl.device.device_type == kDLCUDA ? Device(DeviceType::CUDA, static_cast<int16_t>(dl.device.device_id))
                                                   : Device(DeviceType::CPU);
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  return from_blob(data, sizes, strides, dtype, [managed](void*) { if (managed->deleter) managed->deleter(managed); },
                   device);
}

}  // namespace trainrun
