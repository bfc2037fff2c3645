// CorpusReader: streams the files of a corpus (text files, JSONL files, standard input) as chunks
// of about 1 MiB of complete documents (text) or complete lines (JSONL), never a whole file, so
// the memory of prepare stays bounded whatever the corpus size. Text chunks are cut exactly as
// split_documents() cuts the whole file. parse_jsonl_chunk() turns a JSONL chunk's lines into
// documents; it runs on prepare's worker threads. No tokenization, no train/validation choice here.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hwtrain/data/corpus.h"
#include "hwtrain/data/prepare.h"

namespace hwt {

// One split unit (or fragment of one) inside a chunk; offsets into CorpusChunk::piece_source().
struct ChunkPiece {
  size_t offset = 0, size = 0;
  bool continues = false;  // see DocumentPiece
  bool fragment = false;
};

struct CorpusChunk {
  int64_t seq = 0;             // position in the stream of chunks
  std::string source;          // the file, for messages ("<stdin>" for standard input)
  bool jsonl = false;
  uint64_t file_offset = 0;    // byte offset of text[0] in its file
  int64_t first_line = 1;      // line number of text[0], 1-based (JSONL messages)
  std::string text;            // bytes as read
  std::string decoded;         // JSONL: the documents' texts, which pieces refer to
  std::vector<ChunkPiece> pieces;
  int64_t num_bad_lines = 0;   // JSONL lines skipped: not JSON, or without the text field
  std::string first_bad_line;  // "file:line: why" of the first of them
  // Filled by tokenization (tokenizers that are not byte-level): ids of piece i are
  // ids[id_ends[i-1] .. id_ends[i]).
  std::vector<int32_t> ids;
  std::vector<size_t> id_ends;

  const std::string& piece_source() const { return jsonl ? decoded : text; }
  std::string_view piece_text(size_t i) const {
    return std::string_view(piece_source()).substr(pieces[i].offset, pieces[i].size);
  }
  // Where byte `at` of piece i came from, for messages: "file at byte offset N", or for JSONL
  // "file (JSONL lines from N)".
  std::string piece_location(size_t i, size_t at) const {
    return jsonl ? source + " (JSONL lines from " + std::to_string(first_line) + ")"
                 : source + " at byte offset " + std::to_string(file_offset + pieces[i].offset + at);
  }
  void clear();
};

struct CorpusReadStats {
  int64_t num_files = 0;          // files read as text or JSONL
  int64_t num_binary_files = 0;   // files in directories skipped for NUL bytes in their first block
  std::string first_binary_file;  // the first of them, for the warning
  int64_t num_bytes = 0;          // bytes read
  std::vector<int64_t> files_per_input, binary_per_input;
  uint64_t stdin_hash = 0;        // of the bytes read from standard input (fingerprint); 0 = none
};

// True for the extensions read as JSONL when the format is auto: .jsonl, .ndjson.
bool is_jsonl_path(const fs::path& path);

class CorpusReader {
 public:
  // Reads `listing` with options.format, jsonl_field, document_separator, max_document_bytes.
  CorpusReader(CorpusListing listing, const PrepareOptions& options, size_t read_bytes = size_t{1} << 20);
  ~CorpusReader();
  CorpusReader(const CorpusReader&) = delete;
  CorpusReader& operator=(const CorpusReader&) = delete;

  // Fills `chunk` (cleared first) with the next complete text; false when the corpus is done.
  // DataError naming the file: unreadable, binary (a named file with NUL bytes, or NUL bytes after
  // the first block), a JSONL line over 256 MiB.
  bool next(CorpusChunk& chunk);

  // Read by the thread that calls next(), once it has returned false (or between calls).
  const CorpusReadStats& stats() const { return stats_; }
  // Bytes read so far: safe to read from any thread while next() runs (the progress line).
  int64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  const CorpusListing& listing() const { return listing_; }

 private:
  bool open_next_file();
  void close_file();
  bool read_block();  // false at end of file
  void cut_text(CorpusChunk& chunk);
  void cut_jsonl(CorpusChunk& chunk);
  // Emits early pieces of the unfinished document starting at pending_[from] with `known` bytes.
  size_t cut_open_document(std::string_view rest, size_t known, std::vector<DocumentPiece>& out);
  void take(CorpusChunk& chunk, size_t consumed);

  CorpusListing listing_;
  PrepareOptions options_;
  size_t read_bytes_;
  size_t next_file_ = 0;
  int fd_ = -1;
  const CorpusFile* file_ = nullptr;
  bool file_jsonl_ = false, eof_ = false, first_block_ = true, binary_ = false;
  std::string pending_;           // read, not yet handed out
  uint64_t pending_offset_ = 0;   // file offset of pending_[0]
  int64_t line_ = 1;              // line number of pending_[0]
  bool doc_continues_ = false;    // pieces of the open document were handed out already
  bool fragment_next_ = false;    // the open document is being handed out in fragments
  bool at_line_start_ = true;     // pending_[0] starts a line
  int64_t seq_ = 0;
  uint32_t stdin_crc_ = 0;
  uint64_t stdin_bytes_ = 0;
  CorpusReadStats stats_;
  std::atomic<int64_t> bytes_read_{0};
};

// Parses the lines of a JSONL chunk: each line an object whose string field `field` is one
// document (cut into pieces of max_document_bytes). Blank lines are ignored. A line that is not
// JSON, not an object or lacks the string field is counted in num_bad_lines, or with `strict` is
// a DataError "<file>:<line>: ...".
void parse_jsonl_chunk(CorpusChunk& chunk, const std::string& field, int64_t max_document_bytes, bool strict);

}  // namespace hwt
