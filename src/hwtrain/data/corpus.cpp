#include "hwtrain/data/corpus.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/data/manifest.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/token_file.h"

namespace hwt {

namespace {

bool is_hidden(const fs::path& p) {
  std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// stat() following symlinks; false when the target is missing.
bool stat_file(const fs::path& p, CorpusFile& f) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return false;
  f.size = static_cast<uint64_t>(st.st_size);
  f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return true;
}

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::canonical(p, ec);
  return ec ? p : c;
}

class Fnv64 {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  void str(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  uint64_t value() const { return mix64(h_); }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// fortune's binary index of a text file: "name.dat" beside "name" (strfile's layout). Another .dat
// file is data like any other.
bool fortune_index(const fs::path& p) {
  std::error_code ec;
  return p.extension() == ".dat" && fs::exists(fs::path(p).replace_extension(), ec);
}

// Adds the files under directory `dir` (input number `index`) to `listing`.
void walk_directory(const fs::path& dir, size_t index, const CorpusFilter& filter, std::set<fs::path>& seen,
                    CorpusListing& listing) {
  const int64_t filtered_before = listing.num_filtered;
  std::vector<fs::path> regular, links;
  const int64_t skipped_before = listing.num_skipped;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) throw DataError("cannot read directory " + dir.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw DataError("cannot read directory " + dir.string() + ": " + ec.message());
    const fs::directory_entry& e = *it;
    if (is_hidden(e.path())) {
      if (e.is_directory(ec) && !e.is_symlink(ec)) it.disable_recursion_pending();
      ++listing.num_skipped;
      continue;
    }
    if (e.is_symlink(ec)) {
      if (e.is_regular_file(ec)) {
        links.push_back(e.path());
      } else {
        ++listing.num_skipped;  // a link to a directory (possible cycle), or a broken link
      }
    } else if (e.is_regular_file(ec)) {
      if (fortune_index(e.path())) {
        ++listing.num_skipped;
      } else if (!filter.accepts(e.path().lexically_relative(dir))) {
        ++listing.num_filtered;
      } else {
        regular.push_back(e.path());
      }
    } else if (!e.is_directory(ec)) {
      ++listing.num_skipped;  // fifos, sockets, devices
    }
  }
  // Real files first, so a symlink to one of them (fortunes' .u8 links) is the one skipped.
  std::sort(regular.begin(), regular.end());
  std::sort(links.begin(), links.end());
  std::vector<CorpusFile> found;
  for (const auto* group : {&regular, &links}) {
    for (const fs::path& p : *group) {
      if (group == &links && fortune_index(p)) {
        ++listing.num_skipped;
        continue;
      }
      if (group == &links && !filter.accepts(p.lexically_relative(dir))) {
        ++listing.num_filtered;
        continue;
      }
      CorpusFile f;
      f.path = p;
      f.input_index = index;
      if (!stat_file(p, f) || !seen.insert(canonical_or_self(p)).second) {
        ++listing.num_skipped;
        continue;
      }
      found.push_back(std::move(f));
    }
  }
  if (found.empty()) {
    const int64_t filtered = listing.num_filtered - filtered_before;
    throw DataError("directory " + dir.string() + " contains no text files (" +
                    std::to_string(listing.num_skipped - skipped_before) +
                    " hidden, fortune index (.dat), linked or special entries" +
                    (filtered > 0 ? ", " + std::to_string(filtered) + " left out by --include/--exclude" : std::string()) +
                    " skipped); give a directory of text files");
  }
  std::sort(found.begin(), found.end(), [](const CorpusFile& a, const CorpusFile& b) { return a.path < b.path; });
  for (auto& f : found) listing.files.push_back(std::move(f));
}

}  // namespace

bool CorpusFilter::accepts(const fs::path& relative) const {
  const std::string rel = relative.string(), name = relative.filename().string();
  auto matches = [&](const std::string& pattern) {
    const std::string& subject = pattern.find('/') == std::string::npos ? name : rel;
    return ::fnmatch(pattern.c_str(), subject.c_str(), 0) == 0;
  };
  for (const std::string& p : exclude) {
    if (matches(p)) return false;
  }
  if (include.empty()) return true;
  for (const std::string& p : include) {
    if (matches(p)) return true;
  }
  return false;
}

CorpusListing list_corpus_files(const std::vector<fs::path>& inputs, const CorpusFilter& filter) {
  if (inputs.empty()) throw DataError("no corpus given: name at least one text file or directory");
  CorpusListing listing;
  listing.inputs = inputs;
  std::set<fs::path> seen;
  bool stdin_seen = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const fs::path& input = inputs[i];
    if (input == kStdinInput) {
      if (stdin_seen) throw DataError("standard input ('-') is named twice among the corpus inputs");
      stdin_seen = true;
      CorpusFile f;
      f.path = input;
      f.input_index = i;
      f.explicit_input = true;
      listing.files.push_back(std::move(f));
      continue;
    }
    std::error_code ec;
    fs::file_status st = fs::status(input, ec);
    if (!fs::exists(st)) {
      throw DataError("corpus path " + input.string() + " does not exist; give a text file or a directory");
    }
    if (fs::is_directory(st)) {
      if (is_prepared_dataset(input)) {  // its shards would be skipped as binary, its JSON read as text
        throw DataError("corpus path " + input.string() + " is a dataset hwtrain prepare wrote (its " +
                        kManifestFile + "); give it to train --data, or prepare the text it came from");
      }
      walk_directory(input, i, filter, seen, listing);
    } else if (fs::is_regular_file(st)) {
      CorpusFile f;
      f.path = input;
      f.input_index = i;
      f.explicit_input = true;
      if (!stat_file(input, f)) throw DataError("cannot stat corpus file " + input.string());
      if (seen.insert(canonical_or_self(input)).second) listing.files.push_back(std::move(f));
    } else {
      throw DataError("corpus path " + input.string() + " is neither a regular file nor a directory");
    }
  }
  return listing;
}

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed) {
  Fnv64 h;
  h.u64(seed);
  h.bytes(data, size);
  return h.value();
}

uint64_t corpus_fingerprint(const CorpusListing& listing, const PrepareOptions& options,
                            const std::string& tokenizer_name, uint64_t stdin_hash) {
  Fnv64 h;
  h.str("hwtrain-corpus");
  h.u64(kTokenFileVersion);
  h.u64(listing.files.size());
  for (const CorpusFile& f : listing.files) {
    h.str(f.path.string());
    h.u64(f.size);
    h.u64(static_cast<uint64_t>(f.mtime_ns));
  }
  h.str(tokenizer_name);
  uint64_t bits;
  std::memcpy(&bits, &options.val_fraction, sizeof bits);
  h.u64(bits);
  h.u64(static_cast<uint64_t>(options.split_seed));
  h.str(options.document_separator);
  h.u64(static_cast<uint64_t>(options.max_document_bytes));
  // Added with JSONL and stdin inputs; text-only corpora keep their fingerprints but for this.
  h.u64(static_cast<uint64_t>(options.format));
  h.str(options.jsonl_field);
  h.u64(stdin_hash);
  return h.value();
}

bool is_blank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v') return false;
  }
  return true;
}

size_t first_piece_length(std::string_view doc, size_t max) {
  // A line end within the next max bytes keeps lines whole; else a character boundary.
  size_t window = std::min(doc.size() - max, max);
  const void* nl = std::memchr(doc.data() + max, '\n', window);
  if (nl != nullptr) return static_cast<size_t>(static_cast<const char*>(nl) - doc.data()) + 1;
  size_t cut = max;
  for (int k = 0; k < 3 && cut > 1 && (static_cast<unsigned char>(doc[cut]) & 0xC0) == 0x80; ++k) --cut;
  return cut;
}

void emit_document_pieces(std::string_view doc, int64_t max_bytes, bool continues, std::vector<DocumentPiece>& out) {
  if (!continues && is_blank(doc)) return;
  const size_t max = max_bytes > 0 ? static_cast<size_t>(max_bytes) : doc.size();
  while (doc.size() > max) {
    size_t cut = first_piece_length(doc, max);
    if (cut >= doc.size()) break;
    out.push_back({doc.substr(0, cut), continues});
    continues = true;
    doc.remove_prefix(cut);
  }
  if (!doc.empty() || !continues) out.push_back({doc, continues});
}

LineRange find_separator_line(std::string_view text, const std::string& separator, size_t from, bool at_end,
                              bool starts_line) {
  // Jump between occurrences of the separator's first character (memchr speed) instead of
  // visiting every line: fortune files have a separator every few lines but "%" is rare elsewhere.
  const size_t n = text.size(), len = separator.size();
  size_t pos = from;
  while (pos < n) {
    const void* hit = std::memchr(text.data() + pos, separator[0], n - pos);
    if (hit == nullptr) break;
    size_t s = static_cast<size_t>(static_cast<const char*>(hit) - text.data());
    pos = s + 1;
    if (s > 0 ? text[s - 1] != '\n' : !starts_line) continue;  // not at a line start
    if (n - s < len || text.compare(s, len, separator) != 0) continue;
    size_t e = s + len;
    if (e < n && text[e] == '\r') ++e;
    if (e < n && text[e] != '\n') continue;  // the line goes on: not a separator line
    if (e == n && !at_end) break;             // may go on in the next read
    return {s, e < n ? e + 1 : n};
  }
  return {std::string_view::npos, std::string_view::npos};
}

void split_documents(std::string_view text, const std::string& separator, int64_t max_document_bytes,
                     std::vector<DocumentPiece>& out) {
  if (separator.empty()) {
    emit_document_pieces(text, max_document_bytes, false, out);
    return;
  }
  size_t doc_start = 0;
  for (;;) {
    LineRange line = find_separator_line(text, separator, doc_start);
    if (line.begin == std::string_view::npos) break;
    emit_document_pieces(text.substr(doc_start, line.begin - doc_start), max_document_bytes, false, out);
    doc_start = line.end;
  }
  if (doc_start < text.size()) emit_document_pieces(text.substr(doc_start), max_document_bytes, false, out);
}

bool assign_to_val(int64_t split_seed, int64_t index, double val_fraction) {
  uint64_t h = counter_hash(static_cast<uint64_t>(split_seed), static_cast<uint64_t>(index));
  double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  return u < val_fraction;
}

}  // namespace hwt
