#include "hwtrain/data/corpus_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"

namespace hwt {

namespace {

// An unfinished document is handed out in fragments once this much of it is pending (only when
// max_document_bytes = 0; otherwise its pieces go out as soon as their cut is known).
constexpr size_t kFragmentBytes = size_t{16} << 20;
// A JSONL record must fit in memory whole; a longer "line" means the file is not JSONL.
constexpr size_t kMaxJsonlLineBytes = size_t{256} << 20;

std::string source_name(const CorpusFile& f) { return f.is_stdin() ? "<stdin>" : f.path.string(); }

}  // namespace

void CorpusChunk::clear() {
  seq = 0;
  source.clear();
  jsonl = false;
  file_offset = 0;
  first_line = 1;
  text.clear();
  decoded.clear();
  pieces.clear();
  num_bad_lines = 0;
  first_bad_line.clear();
  ids.clear();
  id_ends.clear();
}

bool is_jsonl_path(const fs::path& path) {
  std::string ext = path.extension().string();
  return ext == ".jsonl" || ext == ".ndjson";
}

CorpusReader::CorpusReader(CorpusListing listing, const PrepareOptions& options, size_t read_bytes)
    : listing_(std::move(listing)), options_(options), read_bytes_(read_bytes) {
  stats_.files_per_input.assign(listing_.inputs.size(), 0);
  stats_.binary_per_input.assign(listing_.inputs.size(), 0);
}

CorpusReader::~CorpusReader() { close_file(); }

void CorpusReader::close_file() {
  if (fd_ > 0) ::close(fd_);  // never close standard input (fd 0)
  fd_ = -1;
  file_ = nullptr;
}

bool CorpusReader::open_next_file() {
  if (next_file_ >= listing_.files.size()) return false;
  file_ = &listing_.files[next_file_++];
  if (file_->is_stdin()) {
    fd_ = STDIN_FILENO;
  } else {
    fd_ = ::open(file_->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw DataError("cannot read corpus file " + file_->path.string() + ": " + std::strerror(errno));
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  switch (options_.format) {
    case InputFormat::kText: file_jsonl_ = false; break;
    case InputFormat::kJsonl: file_jsonl_ = true; break;
    case InputFormat::kAuto: file_jsonl_ = !file_->is_stdin() && is_jsonl_path(file_->path); break;
  }
  eof_ = false;
  binary_ = false;
  first_block_ = true;
  pending_.clear();
  pending_offset_ = 0;
  line_ = 1;
  doc_continues_ = fragment_next_ = false;
  at_line_start_ = true;
  return true;
}

bool CorpusReader::read_block() {
  const size_t old = pending_.size();
  pending_.resize(old + read_bytes_);
  ssize_t n;
  do {
    n = ::read(fd_, &pending_[old], read_bytes_);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    std::string why = std::strerror(errno);
    pending_.resize(old);
    throw DataError("cannot read corpus file " + source_name(*file_) + ": " + why);
  }
  pending_.resize(old + static_cast<size_t>(n));
  if (n == 0) {
    if (first_block_) {  // an empty file: read, and empty
      ++stats_.num_files;
      ++stats_.files_per_input[file_->input_index];
      first_block_ = false;
    }
    return false;
  }
  if (file_->is_stdin()) {
    stdin_crc_ = crc32c_extend(stdin_crc_, pending_.data() + old, static_cast<size_t>(n));
    stdin_bytes_ += static_cast<uint64_t>(n);
  }
  if (!file_jsonl_) {
    const void* nul = std::memchr(pending_.data() + old, '\0', static_cast<size_t>(n));
    if (nul != nullptr) {
      uint64_t at = pending_offset_ + static_cast<uint64_t>(static_cast<const char*>(nul) - pending_.data());
      if (first_block_ && !file_->explicit_input) {
        pending_.clear();
        binary_ = true;  // a binary file in a directory: next() skips it
        return false;
      }
      throw DataError("corpus file " + source_name(*file_) + " is not text (it contains NUL bytes, the first at byte " +
                      std::to_string(at) + "); give text files, or JSONL with --format jsonl");
    }
  }
  if (first_block_) {
    ++stats_.num_files;
    ++stats_.files_per_input[file_->input_index];
  }
  first_block_ = false;
  stats_.num_bytes += n;
  bytes_read_.store(stats_.num_bytes, std::memory_order_relaxed);
  return true;
}

bool CorpusReader::next(CorpusChunk& chunk) {
  chunk.clear();
  for (;;) {
    if (file_ == nullptr && !open_next_file()) {
      if (stdin_bytes_ > 0) stats_.stdin_hash = (stdin_bytes_ << 32) ^ stdin_crc_;
      return false;
    }
    if (!eof_) eof_ = !read_block();
    if (binary_) {
      if (stats_.num_binary_files == 0) stats_.first_binary_file = file_->path.string();
      ++stats_.num_binary_files;
      ++stats_.binary_per_input[file_->input_index];
      close_file();
      continue;
    }
    if (file_jsonl_) {
      cut_jsonl(chunk);
    } else {
      cut_text(chunk);
    }
    if (eof_) close_file();
    if (!chunk.source.empty()) return true;  // take() handed something out
  }
}

void CorpusReader::take(CorpusChunk& chunk, size_t consumed) {
  chunk.seq = seq_++;
  chunk.source = source_name(*file_);
  chunk.jsonl = file_jsonl_;
  chunk.file_offset = pending_offset_;
  chunk.first_line = line_;
  // Hand the buffer over and keep only the rest, copied into the chunk's previous buffer: buffers
  // circulate between reader and chunks instead of being allocated per chunk.
  std::string& recycled = chunk.text;  // cleared by clear(), capacity kept
  recycled.assign(pending_, consumed, std::string::npos);
  pending_.resize(consumed);
  recycled.swap(pending_);  // chunk.text = the consumed text, pending_ = the rest
  pending_.reserve(2 * read_bytes_);
  pending_offset_ += consumed;
}

size_t CorpusReader::cut_open_document(std::string_view rest, size_t known, std::vector<DocumentPiece>& out) {
  const int64_t max = options_.max_document_bytes;
  size_t used = 0;
  if (max > 0) {
    const size_t m = static_cast<size_t>(max);
    if (known < 2 * m + 1 || (!doc_continues_ && is_blank(rest.substr(0, known)))) return 0;
    while (known - used >= 2 * m + 1) {
      size_t cut = first_piece_length(rest.substr(used, known - used), m);
      out.push_back({rest.substr(used, cut), doc_continues_, fragment_next_});
      doc_continues_ = true;
      fragment_next_ = false;
      used += cut;
    }
    return used;
  }
  if (known < kFragmentBytes) return 0;
  if (!doc_continues_ && !fragment_next_ && is_blank(rest.substr(0, known))) return 0;
  const void* nl = ::memrchr(rest.data(), '\n', known);
  size_t cut = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - rest.data()) + 1 : known;
  for (int k = 0; k < 3 && cut > 1 && cut < rest.size() && (static_cast<unsigned char>(rest[cut]) & 0xC0) == 0x80;
       ++k) {
    --cut;
  }
  out.push_back({rest.substr(0, cut), doc_continues_, fragment_next_});
  fragment_next_ = true;
  return cut;
}

void CorpusReader::cut_text(CorpusChunk& chunk) {
  const std::string& sep = options_.document_separator;
  const int64_t max = options_.max_document_bytes;
  std::string_view text(pending_);
  std::vector<DocumentPiece> pieces;
  // Ends the open document at `end` (exclusive) and hands out the rest of it.
  auto close_document = [&](size_t begin, size_t end) {
    const size_t first = pieces.size();
    emit_document_pieces(text.substr(begin, end - begin), max, doc_continues_ || fragment_next_, pieces);
    if (fragment_next_ && pieces.size() > first) pieces[first].fragment = true;
    doc_continues_ = fragment_next_ = false;
  };
  size_t consumed = 0;
  if (!sep.empty()) {
    LineRange line = find_separator_line(text, sep, 0, eof_, at_line_start_);
    while (line.begin != std::string_view::npos) {
      close_document(consumed, line.begin);
      consumed = line.end;
      line = find_separator_line(text, sep, consumed, eof_);
    }
  }
  if (eof_) {
    if (consumed < text.size() || doc_continues_ || fragment_next_) close_document(consumed, text.size());
    consumed = text.size();
  } else {
    // The open document is at least this long: a separator line may start in the last bytes.
    size_t rest = text.size() - consumed;
    size_t known = sep.empty() ? rest : rest - std::min(rest, sep.size() + 1);
    consumed += cut_open_document(text.substr(consumed), known, pieces);
  }
  if (pieces.empty() && consumed == 0) return;
  for (const DocumentPiece& p : pieces) {
    chunk.pieces.push_back({static_cast<size_t>(p.text.data() - pending_.data()), p.text.size(), p.continues,
                            p.fragment});
  }
  if (consumed > 0) at_line_start_ = text[consumed - 1] == '\n';  // early cuts may fall mid-line
  take(chunk, consumed);
}

void CorpusReader::cut_jsonl(CorpusChunk& chunk) {
  size_t consumed = pending_.size();
  if (!eof_) {
    const void* nl = ::memrchr(pending_.data(), '\n', pending_.size());
    if (nl == nullptr) {
      if (pending_.size() > kMaxJsonlLineBytes) {
        throw DataError(source_name(*file_) + ":" + std::to_string(line_) + ": a line longer than " +
                        std::to_string(kMaxJsonlLineBytes >> 20) + " MiB; is this file JSONL (one JSON object per line)?");
      }
      return;
    }
    consumed = static_cast<size_t>(static_cast<const char*>(nl) - pending_.data()) + 1;
  }
  if (consumed == 0) return;
  int64_t lines = 0;
  for (const char* p = pending_.data(); (p = static_cast<const char*>(
                                             std::memchr(p, '\n', pending_.data() + consumed - p))) != nullptr;
       ++p) {
    ++lines;
  }
  take(chunk, consumed);
  line_ += lines;
}

void parse_jsonl_chunk(CorpusChunk& chunk, const std::string& field, int64_t max_document_bytes, bool strict) {
  const std::string& text = chunk.text;
  int64_t line = chunk.first_line;
  std::vector<DocumentPiece> pieces;
  auto bad = [&](std::string_view record, const std::string& why) {
    std::string where = chunk.source + ":" + std::to_string(line) + ": ";
    if (strict) {
      std::string detail;
      try {
        nlohmann::json parsed = nlohmann::json::parse(record.begin(), record.end());
        detail = parsed.is_object() ? "" : " (" + std::string(parsed.type_name()) + ")";
      } catch (const std::exception& e) {
        detail = std::string(" (") + e.what() + ")";
      }
      throw DataError(where + why + detail + "; fix the line, or drop --strict to skip such lines");
    }
    if (chunk.num_bad_lines++ == 0) chunk.first_bad_line = where + why;
  };
  size_t pos = 0;
  while (pos < text.size()) {
    const void* nl = std::memchr(text.data() + pos, '\n', text.size() - pos);
    size_t eol = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - text.data()) : text.size();
    std::string_view record(text.data() + pos, eol - pos);
    if (!record.empty() && record.back() == '\r') record.remove_suffix(1);
    if (!is_blank(record)) {
      nlohmann::json j = nlohmann::json::parse(record.begin(), record.end(), nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) {
        bad(record, "not valid JSON");
      } else if (!j.is_object()) {
        bad(record, "not a JSON object");
      } else {
        auto it = j.find(field);
        if (it == j.end() || !it->is_string()) {
          bad(record, "no string field '" + field + "'" + (it == j.end() ? "" : " (it is " + std::string(it->type_name()) + ")"));
        } else {
          const std::string& doc = it->get_ref<const std::string&>();
          const size_t offset = chunk.decoded.size();
          chunk.decoded += doc;
          pieces.clear();
          emit_document_pieces(std::string_view(chunk.decoded).substr(offset), max_document_bytes, false, pieces);
          for (const DocumentPiece& p : pieces) {
            chunk.pieces.push_back({static_cast<size_t>(p.text.data() - chunk.decoded.data()), p.text.size(),
                                    p.continues, false});
          }
        }
      }
    }
    pos = eol + 1;
    ++line;
  }
}

}  // namespace hwt
