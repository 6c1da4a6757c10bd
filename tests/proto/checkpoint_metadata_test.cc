// The checkpoint metadata schema from C++: what Python's save writes is what
// C++ reads (field numbers and types are the contract), and a foreign or
// damaged byte string is refused rather than half-read.
#include <gtest/gtest.h>

#include <string>

#include "proto/checkpoint.pb.h"

namespace {

TEST(CheckpointMetadata, RoundTripsTensorsWithChunksAndJsonValues) {
  trainrun::checkpoint::Metadata m;
  m.set_format_version(1);
  auto& weight = *(*m.mutable_items())["model.0.weight"].mutable_tensor();
  weight.set_dtype("bfloat16");
  weight.add_global_shape(13);
  weight.add_global_shape(10);
  for (int r = 0; r < 2; ++r) {
    auto* c = weight.add_chunks();
    c->add_offsets(7 * r);
    c->add_offsets(0);
    c->add_sizes(r == 0 ? 7 : 6);
    c->add_sizes(10);
    c->set_file("__" + std::to_string(r) + "_0.distcp.safetensors");
    c->set_byte_offset(96 + r);
    c->set_byte_length(r == 0 ? 140 : 120);
    c->set_crc32c(0xdeadbeefu - r);
  }
  (*m.mutable_items())["step"].set_json("42");
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));

  trainrun::checkpoint::Metadata back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.format_version(), 1u);
  const auto& t = back.items().at("model.0.weight").tensor();
  EXPECT_EQ(t.dtype(), "bfloat16");
  ASSERT_EQ(t.chunks_size(), 2);
  EXPECT_EQ(t.chunks(1).offsets(0), 7);
  EXPECT_EQ(t.chunks(1).sizes(0), 6);
  EXPECT_EQ(t.chunks(1).file(), "__1_0.distcp.safetensors");
  EXPECT_EQ(t.chunks(1).crc32c(), 0xdeadbeeeu);
  EXPECT_EQ(back.items().at("step").kind_case(), trainrun::checkpoint::Item::kJson);
  EXPECT_EQ(back.items().at("step").json(), "42");
}

TEST(CheckpointMetadata, DamagedBytesAreRefused) {
  trainrun::checkpoint::Metadata m;
  (*m.mutable_items())["x"].set_json("1");
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  trainrun::checkpoint::Metadata back;
  EXPECT_FALSE(back.ParseFromString(bytes.substr(0, bytes.size() - 2)));  // cut inside the map entry
  EXPECT_FALSE(back.ParseFromString(std::string("\xff\xff\xff\xff", 4)));
}

}  // namespace
