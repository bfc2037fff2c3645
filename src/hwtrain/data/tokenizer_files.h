// The tokenizer as files in a directory, the form in which it travels with a dataset and with
// every checkpoint: tokenizer.json (name, type, vocabulary size, end-of-text id) and, for
// SentencePiece, tokenizer.model (the model file's bytes, unchanged, so its fingerprint holds).
#pragma once
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "hwtrain/data/tokenizer.h"

namespace hwt {

inline const char* const kTokenizerJsonFile = "tokenizer.json";
inline const char* const kTokenizerModelFile = "tokenizer.model";

// {"name", "type" ("byte" | "sentencepiece" | "hf-bpe" | "hf-sentencepiece"), "vocab_size", "eot_id"[,
// "file", "num_pieces"]}.
nlohmann::json describe_tokenizer(const Tokenizer& tokenizer);

// Writes tokenizer.json (and tokenizer.model for SentencePiece) into `dir`, each atomically; a
// Hugging Face tokenizer as its own files, unchanged.
// `extra` fields are merged into tokenizer.json (e.g. how the model was trained).
void save_tokenizer(const Tokenizer& tokenizer, const std::filesystem::path& dir,
                    const nlohmann::json& extra = nlohmann::json::object());

// True when `dir` holds a tokenizer.json.
bool has_tokenizer_files(const std::filesystem::path& dir);
// True when `dir` (a model directory) brings a tokenizer of its own: tokenizer.json, or a
// SentencePiece tokenizer.model alone; make_tokenizer(dir) reads either.
bool holds_tokenizer(const std::filesystem::path& dir);

// Reads what save_tokenizer wrote. DataError naming the file when tokenizer.json is missing or
// malformed, when tokenizer.model is missing, or when the model's fingerprint, vocabulary size or
// end-of-text id differ from tokenizer.json (a model file swapped after the fact).
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& dir);

}  // namespace hwt
