// CRC32C (Castagnoli), the checksum of token files, shards and TFRecord framing.
// Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise; both give the same
// value (tested against the RFC 3720 vectors).
#pragma once
#include <cstddef>
#include <cstdint>

namespace hwt {

// Extends `crc` (0 to start) with `size` bytes at `data`.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);
inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }

// The masked form TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
inline uint32_t crc32c_masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace hwt
