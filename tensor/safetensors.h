#pragma once
// safetensors files (the Hugging Face format): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the raw little-endian data.
#include <map>
#include <string>

#include "tensor/tensor.h"

namespace trainrun {

// Writes tensors (any strides; CPU) and optional string metadata to path.
void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});
// Reads every tensor; throws ValueError naming the file and what is wrong
// when it is truncated, corrupt or inconsistent.
std::map<std::string, Tensor> load_safetensors(const std::string& path,
                                               std::map<std::string, std::string>* metadata = nullptr);

}  // namespace trainrun
