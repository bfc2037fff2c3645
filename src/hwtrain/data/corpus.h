// The corpus side of prepare: which files of the inputs are read, how a file's text is cut into
// documents, the seeded train/validation choice per document, and the source fingerprint that
// decides whether a cached token file is still current. No tokenization, no output here.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace hwt {

namespace fs = std::filesystem;
struct PrepareOptions;

// The name of standard input among the inputs of prepare.
inline const char* const kStdinInput = "-";

struct CorpusFile {
  fs::path path;          // as found under its input (not canonicalized); "-" = standard input
  size_t input_index = 0; // which input it came from
  bool explicit_input = false;  // named directly (not found in a directory)
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool is_stdin() const { return path == kStdinInput; }
};

struct CorpusListing {
  std::vector<fs::path> inputs;
  std::vector<CorpusFile> files;  // deterministic order: inputs in order, each sorted by path
  int64_t num_skipped = 0;        // hidden, .dat, duplicate symlinks, non-regular entries
  int64_t num_filtered = 0;       // left out by the include/exclude globs
};

// Which files found in directories are read: a file is taken when it matches one of `include`
// (or `include` is empty) and none of `exclude`. A pattern without '/' is matched (fnmatch) against
// the file name, one with '/' against the path relative to its input directory. Files named as
// inputs are always read.
struct CorpusFilter {
  std::vector<std::string> include, exclude;
  bool accepts(const fs::path& relative) const;
};

// Walks `inputs`: files are taken as given; directories recursively, skipping hidden entries
// (names starting with '.'), `.dat` files (fortune's index files), symlinks to files already
// included, symlinked directories (cycles) and non-regular files, and files `filter` rejects.
// "-" is standard input (at most once). DataError, naming the path, for a missing input or a
// directory with no candidate file; an empty input list is a DataError too.
CorpusListing list_corpus_files(const std::vector<fs::path>& inputs, const CorpusFilter& filter = {});

// Hash of (file paths in order, sizes, mtimes, tokenizer name, val_fraction, split_seed,
// separator, max_document_bytes, input format, JSONL field, token file version): equal
// fingerprints mean an equal token file. Standard input has no size or mtime: pass a hash of the
// bytes read from it as `stdin_hash` (known only after reading).
uint64_t corpus_fingerprint(const CorpusListing& listing, const PrepareOptions& options,
                            const std::string& tokenizer_name, uint64_t stdin_hash = 0);

// One unit of the train/validation split: a document, or a piece of a long one.
struct DocumentPiece {
  std::string_view text;
  bool continues = false;  // the previous piece emitted is the preceding part of the same document
  // Not a split unit of its own: more of the previous piece, cut only to bound the memory of
  // streaming (documents never cut with max_document_bytes = 0); it goes to the same split.
  bool fragment = false;
};

// Cuts `text` into documents: the whole text, or the pieces between lines equal to `separator`
// (a trailing '\r' ignored); the separator lines themselves are dropped. Documents that are empty
// or only whitespace are dropped. A document longer than `max_document_bytes` (> 0) is cut into
// pieces of about that size, at a line end when one is near, else at a UTF-8 character boundary,
// so that one big file still yields a validation split.
void split_documents(std::string_view text, const std::string& separator, int64_t max_document_bytes,
                     std::vector<DocumentPiece>& out);

// The pieces of one document, as split_documents cuts it. With `continues`, `doc` is the rest of a
// document whose earlier pieces were already emitted: its first piece continues them, and it is
// emitted even when blank (the document as a whole was not).
void emit_document_pieces(std::string_view doc, int64_t max_document_bytes, bool continues,
                          std::vector<DocumentPiece>& out);
// Length of the first piece of a document longer than max_bytes (> 0): a line end within
// (max, 2 max] when there is one, else max moved back to a UTF-8 character boundary. Depends only
// on doc[0, 2 max] when doc is longer than 2 max, so a streaming reader can cut early.
size_t first_piece_length(std::string_view doc, size_t max_bytes);
// The first separator line at or after `from` (at a line start, equal to `separator` with an
// optional trailing '\r', ended by '\n' or the end of text): [begin, end) with end past its '\n';
// begin == npos if there is none. `at_end` says whether text ends the file (else a line at the end
// without '\n' is not known to be complete).
struct LineRange {
  size_t begin, end;
};
// `starts_line` says whether text[0] is at a line start (a streaming reader may have cut mid-line).
LineRange find_separator_line(std::string_view text, const std::string& separator, size_t from, bool at_end = true,
                              bool starts_line = true);
bool is_blank(std::string_view s);
// 64-bit FNV-1a of bytes, finished with mix64: fingerprints of tokenizer models and stdin.
uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);

// True when document number `index` goes to validation: a seeded hash of (seed, index) mapped to
// [0, 1) and compared with `val_fraction`. Pure, so the same seed always gives the same split.
bool assign_to_val(int64_t split_seed, int64_t index, double val_fraction);

// splitmix64's finalizer: a bijective 64-bit mix; the counter-based generators of data/ use it.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// The `index`-th value of the splitmix64 stream keyed by `seed`.
inline uint64_t counter_hash(uint64_t seed, uint64_t index) {
  return mix64(mix64(seed) + (index + 1) * 0x9e3779b97f4a7c15ull);
}

}  // namespace hwt
