// ShardSetWriter: the TokenSink of a sharded dataset. Each split's tokens are cut into shards of
// `shard_tokens` tokens (the last one shorter), each a token file (token_file.h) holding one split.
// Shards stay sealed (temporary name, zero header) until commit(), which gives every header its
// shard index, the shard count and the fingerprint, then renames them in: an interrupted prepare
// leaves no shard that looks complete. The manifest (manifest.h) is the caller's, written after.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hwtrain/data/token_file.h"
#include "hwtrain/data/token_sink.h"

namespace hwt {

// One committed shard, as the manifest lists it.
struct ShardRecord {
  std::string file;  // name inside the dataset directory
  Split split = Split::kTrain;
  uint32_t index = 0;  // shard_index in its header: train shards first, then validation
  int64_t num_tokens = 0, num_documents = 0;
  uint64_t bytes = 0;  // file size
  uint32_t crc32c = 0;  // of the payload
  std::vector<uint32_t> block_crc32c;  // of each kChecksumBlockBytes of payload
};

// "train-00000.hwt", "val-00012.hwt".
std::string shard_file_name(Split split, int64_t number);

class ShardSetWriter : public TokenSink {
 public:
  ShardSetWriter(std::filesystem::path dir, int64_t shard_tokens, int64_t vocab_size, std::string tokenizer_name);
  ~ShardSetWriter() override;  // removes shards never committed
  ShardSetWriter(const ShardSetWriter&) = delete;
  ShardSetWriter& operator=(const ShardSetWriter&) = delete;

  void begin_document(Split s) override;
  void append(Split s, const int32_t* ids, size_t n) override;
  void append_bytes(Split s, const char* bytes, size_t n) override;

  std::vector<ShardRecord> commit(uint64_t fingerprint);

 private:
  struct Stream {
    std::unique_ptr<TokenFileWriter> writer;
    int64_t tokens = 0, documents = 0, pending_documents = 0;
    std::vector<SealedTokenFile> sealed;
  };
  Stream& stream(Split s) { return streams_[s == Split::kTrain ? 0 : 1]; }
  // Room in the open shard of `s` (opening one if needed), documents begun attributed to it.
  int64_t prepare_room(Split s);
  void after_write(Split s, int64_t n);
  void seal(Split s);

  std::filesystem::path dir_;
  int64_t shard_tokens_, vocab_size_;
  std::string tokenizer_name_;
  Stream streams_[2];
};

}  // namespace hwt
