#include "hwtrain/io/chunk_checksums.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"

namespace hwt {

std::string chunk_checksums_hex(const std::vector<uint32_t>& sums) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(sums.size() * 8, '0');
  for (size_t i = 0; i < sums.size(); ++i) {
    for (int d = 0; d < 8; ++d) out[i * 8 + static_cast<size_t>(d)] = kDigits[(sums[i] >> (28 - 4 * d)) & 0xf];
  }
  return out;
}

std::optional<std::vector<uint32_t>> parse_chunk_checksums_hex(const std::string& hex) {
  if (hex.size() % 8 != 0) return std::nullopt;
  std::vector<uint32_t> sums(hex.size() / 8, 0);
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    uint32_t v = 0;
    if (c >= '0' && c <= '9') {
      v = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v = static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      v = static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    sums[i / 8] = (sums[i / 8] << 4) | v;
  }
  return sums;
}

uint64_t marker_chunk_bytes(const std::vector<uint64_t>& sizes, uint64_t chunk_bytes) {
  auto chunks = [&](uint64_t bytes) {
    uint64_t n = 0;
    for (uint64_t size : sizes) n += size > bytes ? size / bytes + (size % bytes != 0) : 0;
    return n;
  };
  while (chunk_bytes < kMaxChecksumChunkBytes && chunks(chunk_bytes) > kMaxMarkerChunks) {
    chunk_bytes = std::min(2 * chunk_bytes, kMaxChecksumChunkBytes);
  }
  if (chunks(chunk_bytes) > kMaxMarkerChunks) {  // past about 1 PiB
    throw IoError("a checkpoint this large needs more than " + std::to_string(kMaxMarkerChunks) +
                  " chunk checksums even in chunks of " + std::to_string(chunk_bytes) + " bytes");
  }
  return chunk_bytes;
}

void write_marker_chunk_checksums(const CheckpointFile& file, nlohmann::json& entry) {
  if (file.chunk_crc32c.empty()) return;
  entry["chunk_bytes"] = file.chunk_bytes;
  entry["chunk_crc32c_hex"] = chunk_checksums_hex(file.chunk_crc32c);
}

void read_marker_chunk_checksums(const nlohmann::json& f, CheckpointFile& file,
                                 const std::function<IoError(const std::string&)>& bad) {
  if (!f.contains("chunk_bytes") && !f.contains("chunk_crc32c") && !f.contains("chunk_crc32c_hex")) return;
  const bool hex = f.contains("chunk_crc32c_hex"), list = f.contains("chunk_crc32c");
  if (!f.contains("chunk_bytes") || !f["chunk_bytes"].is_number_unsigned() ||
      f["chunk_bytes"].get<uint64_t>() < kMinChecksumChunkBytes || f["chunk_bytes"].get<uint64_t>() > kMaxChecksumChunkBytes ||
      hex == list || (hex && !f["chunk_crc32c_hex"].is_string()) || (list && !f["chunk_crc32c"].is_array())) {
    throw bad("file entry for '" + file.path + "' has chunk checksums without a chunk_bytes in [4 KiB, 1 GiB] and "
              "one chunk_crc32c_hex string (or an older build's chunk_crc32c list)");
  }
  file.chunk_bytes = f["chunk_bytes"].get<uint64_t>();
  const uint64_t want = file.size / file.chunk_bytes + (file.size % file.chunk_bytes != 0);
  if (hex && f["chunk_crc32c_hex"].get_ref<const std::string&>().size() % 8 != 0) {
    throw bad("file entry for '" + file.path + "' has a chunk_crc32c_hex of " +
              std::to_string(f["chunk_crc32c_hex"].get_ref<const std::string&>().size()) +
              " characters, not 8 per chunk");
  }
  const uint64_t listed = hex ? f["chunk_crc32c_hex"].get_ref<const std::string&>().size() / 8 : f["chunk_crc32c"].size();
  if (listed != want) {
    throw bad("file entry for '" + file.path + "' lists " + std::to_string(listed) + " chunk checksums; " +
              std::to_string(file.size) + " bytes in chunks of " + std::to_string(file.chunk_bytes) + " need " +
              std::to_string(want));
  }
  if (hex) {
    const std::optional<std::vector<uint32_t>> sums = parse_chunk_checksums_hex(f["chunk_crc32c_hex"].get<std::string>());
    if (!sums) throw bad("file entry for '" + file.path + "' has a chunk_crc32c_hex that is not hex digits");
    file.chunk_crc32c = *sums;
    return;
  }
  for (const auto& c : f["chunk_crc32c"]) {
    if (!c.is_number_unsigned() || c.get<uint64_t>() > UINT32_MAX) {
      throw bad("file entry for '" + file.path + "' has a chunk checksum " + c.dump() + " that is not a CRC32C");
    }
    file.chunk_crc32c.push_back(c.get<uint32_t>());
  }
}

FileChecksums file_checksums(const fs::path& path, uint64_t chunk_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read " + path.string() + " to checksum it");
  std::vector<char> buf(1 << 20);
  FileChecksums out;
  uint32_t chunk = 0;
  uint64_t in_chunk = 0;  // bytes of the current chunk seen
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const size_t got = static_cast<size_t>(in.gcount());
    out.whole = crc32c_extend(out.whole, buf.data(), got);
    for (size_t done = 0; chunk_bytes > 0 && done < got;) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(got - done, chunk_bytes - in_chunk));
      chunk = crc32c_extend(chunk, buf.data() + done, take);
      done += take;
      in_chunk += take;
      if (in_chunk == chunk_bytes) {
        out.chunks.push_back(chunk);
        chunk = 0;
        in_chunk = 0;
      }
    }
  }
  if (in.bad()) throw IoError("error while reading " + path.string());
  if (in_chunk > 0) out.chunks.push_back(chunk);
  return out;
}

RangeVerifier::RangeVerifier(fs::path ckpt, CheckpointFile file)
    : ckpt_(std::move(ckpt)), file_(std::move(file)), checked_(file_.chunk_crc32c.size(), false) {}

void RangeVerifier::check(uint64_t from, uint64_t to) {
  to = std::min(to, file_.size);
  if (from >= to) return;
  if (file_.chunk_crc32c.empty()) {
    if (whole_checked_) return;
    verify_checkpoint_file(ckpt_, file_);
    whole_checked_ = true;
    bytes_checked_ += file_.size;
    return;
  }
  for (uint64_t c = from / file_.chunk_bytes; c * file_.chunk_bytes < to; ++c) check_chunk(static_cast<size_t>(c));
}

void RangeVerifier::check_chunk(size_t chunk) {
  if (checked_[chunk]) return;
  const fs::path p = ckpt_ / file_.path;
  const uint64_t begin = chunk * file_.chunk_bytes, end = std::min(file_.size, begin + file_.chunk_bytes);
  const std::string where = p.string() + " bytes [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
  std::ifstream in(p, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(begin));
  std::vector<char> buf(static_cast<size_t>(std::min<uint64_t>(end - begin, 1 << 20)));
  uint32_t crc = 0;
  for (uint64_t at = begin; at < end;) {  // through a buffer of at most 1 MiB
    const size_t n = static_cast<size_t>(std::min<uint64_t>(end - at, buf.size()));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    if (!in || static_cast<size_t>(in.gcount()) != n) {
      throw IoError("checkpoint " + ckpt_.string() + " is corrupt: cannot read " + where +
                    " (truncated since it was verified?); use an earlier checkpoint");
    }
    crc = crc32c_extend(crc, buf.data(), n);
    at += n;
  }
  if (crc != file_.chunk_crc32c[chunk]) {
    throw IoError("checkpoint " + ckpt_.string() + " is corrupt: " + where +
                  " fail their CRC32C check (modified or damaged); use an earlier checkpoint");
  }
  checked_[chunk] = true;
  bytes_checked_ += end - begin;
}

}  // namespace hwt
