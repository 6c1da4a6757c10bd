#include "tensor/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/factories.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

// Header lengths past this are corrupt files, not real headers.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

const char* st_dtype(DType t) {
  switch (t) {
    case DType::Bool: return "BOOL";
    case DType::UInt8: return "U8";
    case DType::Int8: return "I8";
    case DType::Int16: return "I16";
    case DType::Int32: return "I32";
    case DType::Int64: return "I64";
    case DType::Float16: return "F16";
    case DType::BFloat16: return "BF16";
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
  }
  return "?";
}

DType parse_st_dtype(const std::string& s, const std::string& path, const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (s == st_dtype(static_cast<DType>(i))) return static_cast<DType>(i);
  throw ValueError(fmt::format("safetensors file '{}': tensor '{}' has unsupported dtype '{}'", path, name, s));
}

}  // namespace

void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> ordered;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TR_CHECK(name != "__metadata__", ValueError, "save_safetensors: '__metadata__' is reserved and cannot name a tensor");
    TR_CHECK(t.defined(), ValueError, "save_safetensors: tensor '{}' is undefined", name);
    Tensor c = contiguous(t.cpu());  // GPU tensors are written from a CPU copy
    uint64_t nbytes = static_cast<uint64_t>(c.nbytes());
    header[name] = {{"dtype", st_dtype(c.dtype())}, {"shape", c.sizes()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    ordered.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TR_CHECK(f.good(), ValueError, "save_safetensors: cannot open '{}' for writing: {}", path, std::strerror(errno));
  uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const Tensor& c : ordered) f.write(static_cast<const char*>(c.data_ptr()), c.nbytes());
  f.flush();
  TR_CHECK(f.good(), ValueError, "save_safetensors: writing '{}' failed: {}", path, std::strerror(errno));
}

std::map<std::string, Tensor> load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  TR_CHECK(f.good(), ValueError, "load_safetensors: cannot open '{}': {}", path, std::strerror(errno));
  const uint64_t file_size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  TR_CHECK(file_size >= 8, ValueError, "safetensors file '{}' is truncated: {} bytes, too short for the 8-byte header length",
           path, file_size);
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(len[i]) << (8 * i);
  TR_CHECK(header_len <= kMaxHeaderBytes && header_len <= file_size - 8, ValueError,
           "safetensors file '{}' is corrupt or truncated: header length {} but the file has {} bytes", path, header_len,
           file_size);
  std::string text(header_len, '\0');
  f.read(text.data(), static_cast<std::streamsize>(header_len));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(fmt::format("safetensors file '{}' has a corrupt JSON header: {}", path, e.what()));
  }
  TR_CHECK(header.is_object(), ValueError, "safetensors file '{}': the header is not a JSON object", path);
  const uint64_t data_size = file_size - 8 - header_len;
  std::map<std::string, Tensor> out;
  struct Range { uint64_t begin, end; std::string name; };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (metadata) {
        TR_CHECK(it->is_object(), ValueError, "safetensors file '{}': __metadata__ must be an object", path);
        for (auto m = it->begin(); m != it->end(); ++m) {
          TR_CHECK(m->is_string(), ValueError, "safetensors file '{}': metadata '{}' is not a string", path, m.key());
          (*metadata)[m.key()] = m->get<std::string>();
        }
      }
      continue;
    }
    IntList shape;
    DType dtype;
    uint64_t begin, end;
    try {
      dtype = parse_st_dtype(it->at("dtype").get<std::string>(), path, name);
      shape = it->at("shape").get<IntList>();
      auto offs = it->at("data_offsets").get<std::vector<uint64_t>>();
      TR_CHECK(offs.size() == 2, ValueError, "safetensors file '{}': tensor '{}' needs 2 data_offsets", path, name);
      begin = offs[0];
      end = offs[1];
    } catch (const nlohmann::json::exception& e) {
      throw ValueError(fmt::format("safetensors file '{}': entry '{}' is malformed: {}", path, name, e.what()));
    }
    int64_t numel = 1;
    for (int64_t s : shape) {
      TR_CHECK(s >= 0, ValueError, "safetensors file '{}': tensor '{}' has a negative dim in shape {}", path, name,
               fmt::format("{}", shape));
      numel *= s;
    }
    TR_CHECK(begin <= end && end <= data_size, ValueError,
             "safetensors file '{}' is truncated or corrupt: tensor '{}' spans bytes [{}, {}) but the data holds {}", path,
             name, begin, end, data_size);
    TR_CHECK(end - begin == static_cast<uint64_t>(numel * element_size(dtype)), ValueError,
             "safetensors file '{}': tensor '{}' of shape {} and dtype {} needs {} bytes but spans {}", path, name,
             fmt::format("{}", shape), dtype_name(dtype), numel * element_size(dtype), end - begin);
    Tensor t = empty(shape, dtype);
    f.seekg(static_cast<std::streamoff>(8 + header_len + begin));
    f.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(end - begin));
    TR_CHECK(f.good() || end == begin, ValueError, "safetensors file '{}': reading tensor '{}' failed", path, name);
    if (dtype == DType::Bool) {  // any non-zero byte would be an invalid bool
      bool* p = t.data<bool>();
      for (int64_t i = 0; i < numel; ++i)
        TR_CHECK(reinterpret_cast<uint8_t*>(p)[i] <= 1, ValueError,
                 "safetensors file '{}': bool tensor '{}' holds byte {} (expected 0 or 1)", path, name,
                 reinterpret_cast<uint8_t*>(p)[i]);
    }
    ranges.push_back({begin, end, name});
    out.emplace(name, t);
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i)
    TR_CHECK(ranges[i].begin >= ranges[i - 1].end, ValueError,
             "safetensors file '{}' is corrupt: tensors '{}' and '{}' overlap", path, ranges[i - 1].name, ranges[i].name);
  return out;
}

}  // namespace trainrun
