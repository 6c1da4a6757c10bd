#pragma once
// CRC-32C (Castagnoli), the checksum of checkpoint pieces: computed with the
// CPU's SSE4.2 crc32 instruction, 8 bytes per step (several GB/s, where
// zlib's CRC-32 manages about one).
#include <cstddef>
#include <cstdint>

namespace trainrun {

// The CRC-32C of n bytes, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace trainrun
