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

struct CorpusFile {
  fs::path path;          // as found under its input (not canonicalized)
  size_t input_index = 0; // which input it came from
  bool explicit_input = false;  // named directly (not found in a directory)
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

struct CorpusListing {
  std::vector<fs::path> inputs;
  std::vector<CorpusFile> files;  // deterministic order: inputs in order, each sorted by path
  int64_t num_skipped = 0;        // hidden, .dat, duplicate symlinks, non-regular entries
};

// Walks `inputs`: files are taken as given; directories recursively, skipping hidden entries
// (names starting with '.'), `.dat` files (fortune's index files), symlinks to files already
// included, symlinked directories (cycles) and non-regular files. DataError, naming the path, for a
// missing input or a directory with no candidate file; an empty input list is a DataError too.
CorpusListing list_corpus_files(const std::vector<fs::path>& inputs);

// Hash of (file paths in order, sizes, mtimes, tokenizer name, val_fraction, split_seed,
// separator, max_document_bytes, token file version): equal fingerprints mean an equal token file.
uint64_t corpus_fingerprint(const CorpusListing& listing, const PrepareOptions& options,
                            const std::string& tokenizer_name);

// One unit of the train/validation split: a document, or a piece of a long one.
struct DocumentPiece {
  std::string_view text;
  bool continues = false;  // the previous piece emitted is the preceding part of the same document
};

// Cuts `text` into documents: the whole text, or the pieces between lines equal to `separator`
// (a trailing '\r' ignored); the separator lines themselves are dropped. Documents that are empty
// or only whitespace are dropped. A document longer than `max_document_bytes` (> 0) is cut into
// pieces of about that size, at a line end when one is near, else at a UTF-8 character boundary,
// so that one big file still yields a validation split.
void split_documents(std::string_view text, const std::string& separator, int64_t max_document_bytes,
                     std::vector<DocumentPiece>& out);

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
