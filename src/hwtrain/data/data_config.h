// DataConfig: where training text comes from and how it is split. Header-only plain struct.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/core/option_checks.h"

namespace hwt {

struct DataConfig {
  // A text file, a directory of text files, a prepared token file (.hwt) or dataset directory
  // (manifest.json, from hwtrain prepare); "" = the default corpus (Debian's fortunes), prepared
  // once and cached.
  std::string path = "";
  // byte, a SentencePiece .model file, or a directory holding one (tokenizer train's output). A
  // dataset directory brings its own tokenizer; the default 'byte' then defers to it.
  std::string tokenizer = "byte";
  double val_fraction = 0.05;      // share of documents held out for validation
  int64_t split_seed = 1337;       // seed of the document-level train/validation choice
  // A line that separates documents inside a file; "" = one file, one document (the default
  // corpus, fortune files, then uses "%").
  std::string document_separator = "";
  std::string cache_dir = "";  // token files prepared from text corpora are cached here; "" = ~/.cache/hwtrain/data
  // Documents longer than this are cut into pieces of about this size before the split, so that
  // one large text file still gets a validation split; 0 = never cut. 64 KiB rarely cuts an
  // ordinary document and gives tiny-shakespeare (1.1 MB, one file) 17 pieces.
  int64_t max_document_bytes = 65536;
  // How training draws windows: random offsets (with replacement, nanoGPT's way: no epoch
  // boundaries to manage on small corpora) or sequential passes (every window once per epoch,
  // shards and windows shuffled per epoch; for corpora large enough to count epochs).
  std::string sampling = "random";

  void validate() const {
    check_at_least("data.max_document_bytes", max_document_bytes, 0);
    if (!(val_fraction > 0.0 && val_fraction <= 0.5)) {
      option_range_error("data.val_fraction", option_text(val_fraction), "must be in (0, 0.5]");
    }
  }

  template <class V>
  void visit(V& v) {
    v("path", path, "text file, directory or prepared token file; empty = default corpus");
    v("tokenizer", tokenizer, "'byte' or a SentencePiece model path");
    v("val_fraction", val_fraction, "fraction of documents held out for validation");
    v("split_seed", split_seed, "seed of the train/validation split");
    v("document_separator", document_separator, "line separating documents inside a file");
    v("cache_dir", cache_dir, "where token files prepared from text corpora are cached (empty = ~/.cache/hwtrain/data)");
    v("max_document_bytes", max_document_bytes, "longer documents are cut into pieces this big before the split (0 = never)");
    v("sampling", sampling, "training windows: random offsets or sequential shuffled passes",
      std::vector<std::string>{"random", "sequential"});
  }
};

}  // namespace hwt
