#include "hwtrain/io/chunk_checksums.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"

namespace hwt {

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
