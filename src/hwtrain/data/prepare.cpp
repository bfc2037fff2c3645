#include "hwtrain/data/prepare.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/data_config.h"
#include "hwtrain/data/token_file.h"
#include "hwtrain/data/tokenizer.h"

namespace hwt {

PrepareOptions PrepareOptions::from_config(const DataConfig& data) {
  PrepareOptions o;
  o.tokenizer = data.tokenizer;
  o.val_fraction = data.val_fraction;
  o.split_seed = data.split_seed;
  o.document_separator = data.document_separator;
  o.max_document_bytes = data.max_document_bytes;
  return o;
}

void PrepareOptions::validate() const {
  if (!(val_fraction > 0.0 && val_fraction < 1.0)) {
    throw ConfigError("data.val_fraction = " + std::to_string(val_fraction) +
                      " is out of range; valid: 0 < val_fraction < 1 (e.g. 0.05)");
  }
  if (max_document_bytes < 0) {
    throw ConfigError("data.max_document_bytes = " + std::to_string(max_document_bytes) +
                      " is out of range; valid: >= 0 (0 = never cut documents)");
  }
  if (document_separator.find('\n') != std::string::npos) {
    throw ConfigError("data.document_separator must be a single line, without newlines");
  }
}

namespace {

// Reads the whole of `path` into `buf`, with one read() per chunk and no stream copies.
void read_whole(const fs::path& path, std::string& buf) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError("cannot read corpus file " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  size_t cap = (::fstat(fd, &st) == 0 && st.st_size > 0) ? static_cast<size_t>(st.st_size) + 1 : 65536;
  buf.resize(cap);
  size_t got = 0;
  for (;;) {
    if (got == buf.size()) buf.resize(buf.size() * 2);
    ssize_t n = ::read(fd, &buf[got], buf.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      throw DataError("cannot read corpus file " + path.string() + ": " + why);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  buf.resize(got);
}

// Routes split units into the writer: end-of-text between documents, none between adjacent pieces
// of one document; keeps the last train unit back so it can move to validation if none went there.
class SplitAssembler {
 public:
  SplitAssembler(const Tokenizer& tok, TokenFileWriter& writer) : tok_(tok), writer_(writer) {}

  void add(std::string_view text, int64_t index, bool continues, bool to_val) {
    if (to_val) {
      val_units_.push_back({val_text_.size(), text.size(), index, continues});
      val_text_.append(text);
      return;
    }
    flush_pending();
    pending_.assign(text);
    pending_unit_ = {0, text.size(), index, continues};
    has_pending_ = true;
  }

  // Applies the non-empty guarantees and writes the validation split; `what` names the corpus.
  void finish(const std::string& what, int64_t num_bytes) {
    if (val_units_.empty() && has_pending_) {
      val_units_.push_back({val_text_.size(), pending_.size(), pending_unit_.index, pending_unit_.continues});
      val_text_.append(pending_);
      has_pending_ = false;
    }
    flush_pending();
    if (num_train_ == 0 && val_units_.size() >= 2) {
      const Unit& u = val_units_.front();
      write_unit(std::string_view(val_text_).substr(u.offset, u.len), u, last_train_, num_train_);
      val_units_.erase(val_units_.begin());
    }
    if (num_train_ == 0 || val_units_.empty()) {
      throw DataError("corpus " + what + " is too small to split: " + std::to_string(num_train_ + val_units_.size()) +
                      " document(s) in " + std::to_string(num_bytes) +
                      " bytes; train and validation need one each (add text, or set data.document_separator)");
    }
    writer_.begin_val();
    int64_t last_val = -2, num_val = 0;
    for (const Unit& u : val_units_) {
      write_unit(std::string_view(val_text_).substr(u.offset, u.len), u, last_val, num_val);
    }
  }

  int64_t num_train_units() const { return num_train_; }
  int64_t num_val_units() const { return static_cast<int64_t>(val_units_.size()); }

 private:
  struct Unit {
    size_t offset, len;
    int64_t index;
    bool continues;
  };

  void flush_pending() {
    if (!has_pending_) return;
    write_unit(pending_, pending_unit_, last_train_, num_train_);
    has_pending_ = false;
  }

  void write_unit(std::string_view text, const Unit& u, int64_t& last_index, int64_t& count) {
    bool joined = u.continues && last_index == u.index - 1;
    if (count > 0 && !joined) {
      int32_t eot = tok_.eot_id();
      writer_.append(&eot, 1);
    }
    if (tok_.is_byte_level()) {
      writer_.append_bytes(text.data(), text.size());
    } else {
      ids_.clear();
      tok_.encode_append(text, ids_);
      writer_.append(ids_);
    }
    last_index = u.index;
    ++count;
  }

  const Tokenizer& tok_;
  TokenFileWriter& writer_;
  std::string pending_;
  Unit pending_unit_{};
  bool has_pending_ = false;
  int64_t last_train_ = -2, num_train_ = 0;
  std::string val_text_;
  std::vector<Unit> val_units_;
  std::vector<int32_t> ids_;
};

std::string describe_inputs(const std::vector<fs::path>& inputs) {
  std::vector<std::string> names;
  for (const auto& p : inputs) names.push_back(p.string());
  return join(names, " ");
}

}  // namespace

PrepareStats prepare_token_file(const std::vector<fs::path>& inputs, const fs::path& output,
                                const PrepareOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  options.validate();
  std::unique_ptr<Tokenizer> tok = make_tokenizer(options.tokenizer);
  CorpusListing listing = list_corpus_files(inputs);
  PrepareStats stats;
  stats.output = output;
  stats.fingerprint = corpus_fingerprint(listing, options, tok->name());
  stats.num_skipped_files = listing.num_skipped;

  TokenFileWriter writer(output, tok->vocab_size(), tok->name(), stats.fingerprint);
  SplitAssembler assembler(*tok, writer);
  std::vector<int64_t> text_files_per_input(inputs.size(), 0), binary_per_input(inputs.size(), 0);
  std::string buf;
  std::vector<DocumentPiece> pieces;
  int64_t index = 0;
  for (const CorpusFile& f : listing.files) {
    read_whole(f.path, buf);
    if (std::memchr(buf.data(), '\0', buf.size()) != nullptr) {
      if (f.explicit_input) {
        throw DataError("corpus file " + f.path.string() + " is not text (it contains NUL bytes); give text files");
      }
      ++binary_per_input[f.input_index];
      ++stats.num_skipped_files;
      continue;
    }
    ++text_files_per_input[f.input_index];
    ++stats.num_files;
    stats.num_bytes += static_cast<int64_t>(buf.size());
    pieces.clear();
    split_documents(buf, options.document_separator, options.max_document_bytes, pieces);
    for (const DocumentPiece& piece : pieces) {
      assembler.add(piece.text, index, piece.continues, assign_to_val(options.split_seed, index, options.val_fraction));
      ++index;
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (text_files_per_input[i] == 0 && binary_per_input[i] > 0) {
      throw DataError("directory " + inputs[i].string() + " contains no text files (" +
                      std::to_string(binary_per_input[i]) + " binary files skipped); give a directory of text files");
    }
  }
  if (index == 0) {
    throw DataError("corpus " + describe_inputs(inputs) + " is empty: " + std::to_string(stats.num_files) +
                    " text file(s), " + std::to_string(stats.num_bytes) + " bytes, no non-blank document");
  }
  assembler.finish(describe_inputs(inputs), stats.num_bytes);
  TokenFileHeader h = writer.commit(assembler.num_train_units(), assembler.num_val_units());
  stats.num_documents = index;
  stats.num_train_documents = h.num_train_documents;
  stats.num_val_documents = h.num_val_documents;
  stats.num_train_tokens = h.num_train_tokens;
  stats.num_val_tokens = h.num_val_tokens;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

std::string describe(const PrepareStats& s) {
  std::ostringstream out;
  out << s.num_files << " files, " << s.num_documents << " documents (" << s.num_train_documents << " train, "
      << s.num_val_documents << " val), " << format_bytes(static_cast<double>(s.num_bytes)) << " -> "
      << s.num_train_tokens << " train + " << s.num_val_tokens << " val tokens in " << s.seconds << " s";
  if (s.num_bytes > 0 && s.seconds > 0) {
    out << " (" << format_bytes(static_cast<double>(s.num_bytes) / s.seconds) << "/s)";
  }
  return out.str();
}

}  // namespace hwt
