// TokenSink: where prepare's two token streams (train, validation) go, in order: one token file
// (SingleFileSink: train tokens straight into the file, validation tokens spilled to an unlinked
// temporary file and appended at the end) or a directory of shards (ShardSetWriter, shard_writer.h).
// Memory stays bounded either way.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hwtrain/data/token_file.h"

namespace hwt {

class TokenSink {
 public:
  virtual ~TokenSink() = default;
  // A split unit (document or piece of one) starts in split `s`; its tokens follow.
  virtual void begin_document(Split s) = 0;
  // Ids of split `s`, already checked by the router to be in the vocabulary.
  virtual void append(Split s, const int32_t* ids, size_t n) = 0;
  // Bytes of a byte-level tokenizer (id == byte value).
  virtual void append_bytes(Split s, const char* bytes, size_t n) = 0;
};

// One .hwt file (token_file.h): train tokens, then validation tokens.
class SingleFileSink : public TokenSink {
 public:
  SingleFileSink(const std::filesystem::path& path, int64_t vocab_size, const std::string& tokenizer_name);
  ~SingleFileSink() override;

  void begin_document(Split s) override;
  void append(Split s, const int32_t* ids, size_t n) override;
  void append_bytes(Split s, const char* bytes, size_t n) override;

  // Appends the spilled validation tokens, writes the header and renames the file into place.
  TokenFileHeader commit(uint64_t fingerprint);

 private:
  void spill(const int32_t* ids, size_t n);
  void flush_spill();

  TokenFileWriter writer_;
  int spill_fd_ = -1;  // unlinked at creation: never left behind
  std::vector<int32_t> spill_buffer_;
  int64_t num_spilled_ = 0;
  int64_t num_documents_[2] = {0, 0};
};

}  // namespace hwt
