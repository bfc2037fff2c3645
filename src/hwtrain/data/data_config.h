// DataConfig: where training text comes from and how it is split. Header-only plain struct.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/core/enum_names.h"
#include "hwtrain/core/option_checks.h"

namespace hwt {

// How training draws windows: random offsets (with replacement), or sequential passes (every
// window once per epoch, shards and windows shuffled per epoch).
enum class SamplingMode { kRandom, kSequential };
template <>
struct EnumNames<SamplingMode> {
  static constexpr std::array<std::pair<SamplingMode, const char*>, 2> table{{
      {SamplingMode::kRandom, "random"},
      {SamplingMode::kSequential, "sequential"}}};
};

struct DataConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  std::string path = "";
  std::string tokenizer = "byte";
  double val_fraction = 0.05;
  int64_t split_seed = 1337;
  std::string document_separator = "";
  std::string cache_dir = "";
  // 64 KiB rarely cuts an ordinary document and gives tiny-shakespeare (1.1 MB, one file) 17 pieces.
  int64_t max_document_bytes = 65536;
  // random: nanoGPT's way, no epoch boundaries to manage on small corpora.
  SamplingMode sampling = SamplingMode::kRandom;

  void validate() const {
    check_at_least("data.max_document_bytes", max_document_bytes, 0);
    if (max_document_bytes > 0 && max_document_bytes < 4) {  // a cut inside a UTF-8 character
      option_range_error("data.max_document_bytes", std::to_string(max_document_bytes),
                         "must be 0 (never cut) or at least 4 (one UTF-8 character)");
    }
    if (!(val_fraction > 0.0 && val_fraction <= 0.5)) {
      option_range_error("data.val_fraction", option_text(val_fraction), "must be in (0, 0.5]");
    }
  }

  template <class V>
  void visit(V& v) {
    v("path", path, "a text file, a directory of text files, a prepared token file (.hwt) or dataset "
      "directory (hwtrain prepare); empty = the default corpus (Debian's fortunes), prepared once and cached");
    v("tokenizer", tokenizer, "byte, a SentencePiece .model file, or a directory holding one; a dataset "
      "directory brings its own tokenizer, which byte then defers to");
    v("val_fraction", val_fraction, "fraction of documents held out for validation");
    v("split_seed", split_seed, "seed of the train/validation split");
    v("document_separator", document_separator, "a line separating documents inside a file; empty = one "
      "file, one document (the default corpus uses %)");
    v("cache_dir", cache_dir, "where token files prepared from text corpora are cached (empty = "
      "~/.cache/hwtrain/data)");
    v("max_document_bytes", max_document_bytes, "documents longer than this are cut into pieces of about "
      "this size before the split, so one large file still gets a validation split; 0 = never");
    v("sampling", sampling, "how training draws windows: random offsets (with replacement) or sequential "
      "passes (every window once per epoch, shards and windows shuffled per epoch)");
  }
};

}  // namespace hwt
