// DataConfig: where training text comes from and how it is split. Header-only plain struct.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hwt {

struct DataConfig {
  // A text file, a directory of text files, or a prepared token file (.hwt); "" = the default
  // corpus (Debian's fortunes), prepared once and cached.
  std::string path = "";
  std::string tokenizer = "byte";  // byte, or the path of a SentencePiece .model file
  double val_fraction = 0.05;      // share of documents held out for validation
  int64_t split_seed = 1337;       // seed of the document-level train/validation choice
  // A line that separates documents inside a file ("%" in fortune files); "" = one file, one document.
  std::string document_separator = "";
  std::string cache_dir = "";  // prepared default corpus lives here; "" = ~/.cache/hwtrain/data

  template <class V>
  void visit(V& v) {
    v("path", path, "text file, directory or prepared token file; empty = default corpus");
    v("tokenizer", tokenizer, "'byte' or a SentencePiece model path");
    v("val_fraction", val_fraction, "fraction of documents held out for validation");
    v("split_seed", split_seed, "seed of the train/validation split");
    v("document_separator", document_separator, "line separating documents inside a file");
    v("cache_dir", cache_dir, "where prepared default-corpus token files are cached");
  }
};

}  // namespace hwt
