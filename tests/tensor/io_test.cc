#include <cstdio>
#include <fstream>

#include "tests/tensor/test_util.h"

namespace trainrun {

std::string temp_path(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

TEST(Safetensors, RoundTripsEveryDTypeAndMetadata) {
  std::map<std::string, Tensor> in = {
      {"f32", arange(6, DType::Float32).view({2, 3}).t()},  // non-contiguous on purpose
      {"f16", ft({1.5, -2}).to(DType::Float16)},
      {"bf16", ft({3.25}).to(DType::BFloat16)},
      {"f64", tensor<double>({1e-300})},
      {"i64", it({-1, 1LL << 40})},
      {"i32", tensor<int32_t>({7})},
      {"i8", tensor<int8_t>({-128})},
      {"u8", tensor<uint8_t>({255})},
      {"b", tensor<bool>({true, false})},
      {"empty", zeros({0, 3})},
  };
  std::string path = temp_path("roundtrip.safetensors");
  save_safetensors(in, path, {{"format", "pt"}});
  std::map<std::string, std::string> meta;
  auto out = load_safetensors(path, &meta);
  EXPECT_EQ(meta["format"], "pt");
  ASSERT_EQ(out.size(), in.size());
  for (auto& [name, t] : in) {
    EXPECT_EQ(out[name].dtype(), t.dtype()) << name;
    EXPECT_EQ(out[name].sizes(), t.sizes()) << name;
    EXPECT_EQ(values(out[name]), values(t)) << name;
  }
}

TEST(Safetensors, CorruptAndTruncatedFilesGiveClearErrors) {
  std::string path = temp_path("bad.safetensors");
  save_safetensors({{"w", ones({4})}}, path);
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& b) { std::ofstream(path, std::ios::binary | std::ios::trunc) << b; };
  write(bytes.substr(0, bytes.size() - 3));
  expect_error<ValueError>([&] { load_safetensors(path); }, {"truncated", "'w'"});
  write(bytes.substr(0, 5));
  expect_error<ValueError>([&] { load_safetensors(path); }, {"truncated", "5 bytes"});
  std::string huge = bytes;
  huge[6] = 0x7f;  // header length now far beyond the file
  write(huge);
  expect_error<ValueError>([&] { load_safetensors(path); }, {"header length"});
  std::string bad_json = bytes;
  bad_json[8] = '[';
  write(bad_json);
  expect_error<ValueError>([&] { load_safetensors(path); }, {"JSON"});
  expect_error<ValueError>([&] { load_safetensors(temp_path("missing.safetensors")); }, {"cannot open", "missing"});
}

TEST(DLPack, ZeroCopyRoundTripKeepsMemoryAlive) {
  Tensor x = arange(12, DType::Float32).view({3, 4}).slice(1, 1, 3);
  DLManagedTensor* m = to_dlpack(x);
  EXPECT_EQ(m->dl_tensor.ndim, 2);
  EXPECT_EQ(m->dl_tensor.strides[0], 4);
  EXPECT_EQ(m->dl_tensor.byte_offset, 4u);
  void* base = x.data_ptr();
  x = Tensor();  // the capsule alone keeps the memory alive
  Tensor y = from_dlpack(m);
  EXPECT_EQ(y.data_ptr(), base);
  EXPECT_VALUES(y, 1, 2, 5, 6, 9, 10);
  Tensor b = from_dlpack(to_dlpack(tensor<bool>({true})));
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(from_dlpack(to_dlpack(ones({2}, DType::BFloat16))).dtype(), DType::BFloat16);
}

}  // namespace trainrun
