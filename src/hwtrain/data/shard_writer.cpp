#include "hwtrain/data/shard_writer.h"

#include <unistd.h>

#include <cstdio>

#include "hwtrain/core/error.h"

namespace hwt {

std::string shard_file_name(Split split, int64_t number) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s-%05lld.hwt", split == Split::kTrain ? "train" : "val",
                static_cast<long long>(number));
  return buf;
}

ShardSetWriter::ShardSetWriter(std::filesystem::path dir, int64_t shard_tokens, int64_t vocab_size,
                               std::string tokenizer_name)
    : dir_(std::move(dir)), shard_tokens_(shard_tokens), vocab_size_(vocab_size), tokenizer_name_(std::move(tokenizer_name)) {
  if (shard_tokens_ < 1) {
    throw ConfigError("--shard-tokens = " + std::to_string(shard_tokens_) + " is out of range; valid: >= 1");
  }
}

ShardSetWriter::~ShardSetWriter() {
  for (Stream& st : streams_) {
    for (const SealedTokenFile& s : st.sealed) ::unlink(s.tmp.c_str());
  }
}

int64_t ShardSetWriter::prepare_room(Split s) {
  Stream& st = stream(s);
  if (!st.writer) {
    fs::path path = dir_ / shard_file_name(s, static_cast<int64_t>(st.sealed.size()));
    st.writer = std::make_unique<TokenFileWriter>(path, vocab_size_, tokenizer_name_, 0);
    if (s == Split::kVal) st.writer->begin_val();
  }
  st.documents += st.pending_documents;  // a document belongs to the shard holding its first token
  st.pending_documents = 0;
  return shard_tokens_ - st.tokens;
}

void ShardSetWriter::after_write(Split s, int64_t n) {
  Stream& st = stream(s);
  st.tokens += n;
  if (st.tokens == shard_tokens_) seal(s);
}

void ShardSetWriter::begin_document(Split s) { ++stream(s).pending_documents; }

void ShardSetWriter::append(Split s, const int32_t* ids, size_t n) {
  while (n > 0) {
    int64_t take = std::min<int64_t>(static_cast<int64_t>(n), prepare_room(s));
    stream(s).writer->append(ids, static_cast<size_t>(take));
    ids += take;
    n -= static_cast<size_t>(take);
    after_write(s, take);
  }
}

void ShardSetWriter::append_bytes(Split s, const char* bytes, size_t n) {
  while (n > 0) {
    int64_t take = std::min<int64_t>(static_cast<int64_t>(n), prepare_room(s));
    stream(s).writer->append_bytes(bytes, static_cast<size_t>(take));
    bytes += take;
    n -= static_cast<size_t>(take);
    after_write(s, take);
  }
}

void ShardSetWriter::seal(Split s) {
  Stream& st = stream(s);
  if (!st.writer) return;
  const bool train = s == Split::kTrain;
  st.sealed.push_back(st.writer->seal(train ? st.documents : 0, train ? 0 : st.documents));
  st.writer.reset();
  st.tokens = st.documents = 0;
}

std::vector<ShardRecord> ShardSetWriter::commit(uint64_t fingerprint) {
  seal(Split::kTrain);
  seal(Split::kVal);
  const size_t total = streams_[0].sealed.size() + streams_[1].sealed.size();
  std::vector<ShardRecord> records;
  uint32_t index = 0;
  for (Split s : {Split::kTrain, Split::kVal}) {
    for (SealedTokenFile& sealed : stream(s).sealed) {
      sealed.header.shard_index = index;
      sealed.header.num_shards = static_cast<uint32_t>(total);
      sealed.header.fingerprint = fingerprint;
      commit_sealed(sealed);
      ShardRecord r;
      r.file = sealed.path.filename().string();
      r.split = s;
      r.index = index++;
      r.num_tokens = sealed.header.num_tokens();
      r.num_documents = sealed.header.num_train_documents + sealed.header.num_val_documents;
      r.bytes = sealed.header.expected_file_size();
      r.crc32c = sealed.header.payload_crc32c;
      r.block_crc32c = sealed.block_crc32c;
      records.push_back(std::move(r));
    }
    stream(s).sealed.clear();
  }
  return records;
}

}  // namespace hwt
