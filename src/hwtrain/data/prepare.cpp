#include "hwtrain/data/prepare.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/corpus_reader.h"
#include "hwtrain/data/data_config.h"
#include "hwtrain/data/manifest.h"
#include "hwtrain/data/ordered_pipeline.h"
#include "hwtrain/data/prepare_output.h"
#include "hwtrain/data/shard_writer.h"
#include "hwtrain/data/split_router.h"
#include "hwtrain/data/token_file.h"
#include "hwtrain/data/token_sink.h"
#include "hwtrain/data/tokenizer.h"
#include "hwtrain/data/tokenizer_files.h"
#include "hwtrain/data/utf8.h"
#include "hwtrain/obs/log.h"

namespace hwt {

using Clock = std::chrono::steady_clock;

InputFormat parse_input_format(const std::string& name, const std::string& key) {
  if (name == "auto") return InputFormat::kAuto;
  if (name == "text") return InputFormat::kText;
  if (name == "jsonl") return InputFormat::kJsonl;
  throw ConfigError(key + " = '" + name + "' is not an input format" + did_you_mean(name, {"auto", "text", "jsonl"}) +
                    "; valid: auto, text, jsonl");
}

const char* input_format_name(InputFormat f) {
  switch (f) {
    case InputFormat::kAuto: return "auto";
    case InputFormat::kText: return "text";
    case InputFormat::kJsonl: return "jsonl";
  }
  return "auto";
}

PrepareOptions PrepareOptions::from_config(const DataConfig& data) {
  PrepareOptions o;
  o.tokenizer = data.tokenizer;
  o.val_fraction = data.val_fraction;
  o.split_seed = data.split_seed;
  o.document_separator = data.document_separator;
  o.max_document_bytes = data.max_document_bytes;
  return o;
}

void check_data_threads(int64_t num_threads) {
  if (num_threads < 0 || num_threads > kMaxDataThreads) {
    throw ConfigError("--threads = " + std::to_string(num_threads) + " is out of range; valid: 1 .. " +
                      std::to_string(kMaxDataThreads) + " (0 = one per core)");
  }
}

void PrepareOptions::validate() const {
  if (!(val_fraction > 0.0 && val_fraction < 1.0)) {
    throw ConfigError("data.val_fraction = " + std::to_string(val_fraction) +
                      " is out of range; valid: 0 < val_fraction < 1 (e.g. 0.05)");
  }
  if (max_document_bytes < 0 || (max_document_bytes > 0 && max_document_bytes < 4)) {  // a UTF-8 character is 4
    throw ConfigError("data.max_document_bytes = " + std::to_string(max_document_bytes) +
                      " is out of range; valid: 0 (never cut documents) or >= 4 (one UTF-8 character)");
  }
  if (document_separator.find('\n') != std::string::npos) {
    throw ConfigError("data.document_separator must be a single line, without newlines");
  }
  if (jsonl_field.empty()) throw ConfigError("--jsonl-field is empty; name the field holding the text (e.g. text)");
  if (shard_tokens < 0) {
    throw ConfigError("--shard-tokens = " + std::to_string(shard_tokens) + " is out of range; valid: >= 1 (0 = default)");
  }
  check_data_threads(num_threads);
}

namespace {

// "prepare: 1.2 GiB, 345,678 documents, 23.4 M tokens | 412 MiB/s, 180 M tokens/s" on stderr, at
// most four times a second, only when stderr is a terminal.
class ProgressLine {
 public:
  explicit ProgressLine(bool wanted) : enabled_(wanted && ::isatty(STDERR_FILENO) != 0), t0_(Clock::now()) {}
  ~ProgressLine() { finish(); }
  void update(int64_t bytes, int64_t documents, int64_t tokens) {
    if (!enabled_) return;
    auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(250)) return;
    last_ = now;
    double s = std::max(1e-9, std::chrono::duration<double>(now - t0_).count());
    std::fprintf(stderr, "\rprepare: %s, %lld documents, %.1f M tokens | %s/s, %.1f M tokens/s\033[K",
                 format_bytes(static_cast<double>(bytes)).c_str(), static_cast<long long>(documents), tokens / 1e6,
                 format_bytes(bytes / s).c_str(), tokens / s / 1e6);
    std::fflush(stderr);
    shown_ = true;
  }
  void finish() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool enabled_, shown_ = false;
  Clock::time_point t0_, last_{};
};

std::string describe_inputs(const std::vector<fs::path>& inputs) {
  std::vector<std::string> names;
  for (const auto& p : inputs) names.push_back(p == kStdinInput ? "<stdin>" : p.string());
  return join(names, " ");
}

// Reads, tokenizes (on worker threads) and routes the corpus into `sink`; fills `stats` but the
// output fields. Returns the fingerprint (known only now when standard input was read).
uint64_t run_prepare(const std::vector<fs::path>& inputs, const PrepareOptions& options, const Tokenizer& tok,
                     TokenSink& sink, const CorpusListing& listing, PrepareStats& stats, uint64_t* stdin_hash = nullptr) {
  const auto t0 = Clock::now();
  CorpusReader reader(listing, options);
  SplitRouter router(tok, sink, options.split_seed, options.val_fraction);
  const bool byte_level = tok.is_byte_level();
  int workers = static_cast<int>(options.num_threads);
  if (workers == 0) workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ProgressLine progress(options.progress);

  auto work = [&](CorpusChunk& c) {
    if (c.jsonl) parse_jsonl_chunk(c, options.jsonl_field, options.max_document_bytes, options.strict);
    if (byte_level) return;
    c.id_ends.reserve(c.pieces.size());
    for (size_t i = 0; i < c.pieces.size(); ++i) {
      std::string_view text = c.piece_text(i);
      size_t bad = find_invalid_utf8(text);
      if (bad != std::string_view::npos) {
        throw DataError("invalid UTF-8 in " + c.piece_location(i, bad) + ": tokenizer " + tok.name() +
                        " reads UTF-8 only; fix the file, or use --tokenizer byte, which keeps any bytes");
      }
      tok.encode_append(text, c.ids);
      c.id_ends.push_back(c.ids.size());
    }
  };
  auto consume = [&](CorpusChunk& c) {
    router.add_chunk(c);
    if (c.num_bad_lines > 0) {
      if (stats.num_bad_lines == 0) stats.first_bad_line = c.first_bad_line;
      stats.num_bad_lines += c.num_bad_lines;
    }
    progress.update(reader.bytes_read(), router.num_units(), router.num_tokens());
  };
  run_ordered_pipeline<CorpusChunk>([&](CorpusChunk& c) { return reader.next(c); }, work, consume, workers,
                                    static_cast<size_t>(2 * workers + 2),
                                    [&] { progress.update(reader.bytes_read(), router.num_units(), router.num_tokens()); });
  progress.finish();

  const CorpusReadStats& rs = reader.stats();
  stats.num_files = rs.num_files;
  stats.num_skipped_files = listing.num_skipped + rs.num_binary_files;
  stats.num_filtered_files = listing.num_filtered;
  stats.num_bytes = rs.num_bytes;
  if (rs.num_binary_files > 0) {  // compressed or UTF-16 files in a directory: said, not dropped silently
    log_warn("prepare: {} file(s) skipped as binary (NUL bytes in their first block: compressed, UTF-16, ...), "
             "first {}; decompress or convert them to UTF-8 text to include them",
             rs.num_binary_files, rs.first_binary_file);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (rs.files_per_input[i] == 0 && rs.binary_per_input[i] > 0) {
      throw DataError("directory " + inputs[i].string() + " contains no text files (" +
                      std::to_string(rs.binary_per_input[i]) + " binary files skipped); give a directory of text files");
    }
  }
  if (router.num_units() == 0) {
    std::string bad = stats.num_bad_lines > 0 ? ", " + std::to_string(stats.num_bad_lines) +
                                                    " JSONL lines skipped (first: " + stats.first_bad_line + ")"
                                              : "";
    throw DataError("corpus " + describe_inputs(inputs) + " is empty: " + std::to_string(stats.num_files) +
                    " text file(s), " + std::to_string(stats.num_bytes) + " bytes, no non-blank document" + bad);
  }
  router.finish(describe_inputs(inputs), stats.num_bytes);
  if (stats.num_bad_lines > 0) {
    log_warn("prepare: skipped {} JSONL line(s) that were not JSON objects with a string field '{}' (first: {}); "
             "--strict makes them errors",
             stats.num_bad_lines, options.jsonl_field, stats.first_bad_line);
  }
  stats.num_documents = router.num_units();
  stats.num_train_documents = router.num_units(Split::kTrain);
  stats.num_val_documents = router.num_units(Split::kVal);
  stats.num_train_tokens = router.num_tokens(Split::kTrain);
  stats.num_val_tokens = router.num_tokens(Split::kVal);
  stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (stdin_hash != nullptr) *stdin_hash = rs.stdin_hash;
  return corpus_fingerprint(listing, options, tok.name(), rs.stdin_hash);
}

CorpusFilter filter_of(const PrepareOptions& o) { return CorpusFilter{o.include, o.exclude}; }

}  // namespace

PrepareStats prepare_token_file(const std::vector<fs::path>& inputs, const fs::path& output,
                                const PrepareOptions& options) {
  const auto t0 = Clock::now();
  options.validate();
  std::unique_ptr<Tokenizer> tok = make_tokenizer(options.tokenizer);
  CorpusListing listing = list_corpus_files(inputs, filter_of(options));
  PrepareStats stats;
  stats.output = output;
  SingleFileSink sink(output, tok->vocab_size(), tok->name());
  stats.fingerprint = run_prepare(inputs, options, *tok, sink, listing, stats);
  TokenFileHeader h = sink.commit(stats.fingerprint);
  stats.num_train_tokens = h.num_train_tokens;
  stats.num_val_tokens = h.num_val_tokens;
  stats.num_shards = 1;
  stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return stats;
}

PrepareStats prepare_dataset(const std::vector<fs::path>& inputs, const fs::path& output,
                             const PrepareOptions& options) {
  const auto t0 = Clock::now();
  options.validate();
  std::unique_ptr<Tokenizer> tok = make_tokenizer(options.tokenizer);
  CorpusListing listing = list_corpus_files(inputs, filter_of(options));
  PreparedOutputDir out(output);  // refuses foreign directories; the old dataset stays until commit()
  PrepareStats stats;
  stats.output = output;
  stats.sharded = true;
  const int64_t shard_tokens = options.shard_tokens > 0 ? options.shard_tokens : kDefaultShardTokens;
  ShardSetWriter shards(out.staging(), shard_tokens, tok->vocab_size(), tok->name());
  uint64_t stdin_hash = 0;
  stats.fingerprint = run_prepare(inputs, options, *tok, shards, listing, stats, &stdin_hash);

  DatasetManifest m;
  m.fingerprint = stats.fingerprint;
  m.tokenizer_name = tok->name();
  m.tokenizer = describe_tokenizer(*tok);
  m.vocab_size = tok->vocab_size();
  m.dtype = dtype_for_vocab(tok->vocab_size());
  m.val_fraction = options.val_fraction;
  m.split_seed = options.split_seed;
  m.shard_tokens = shard_tokens;
  m.num_train_tokens = stats.num_train_tokens;
  m.num_val_tokens = stats.num_val_tokens;
  m.num_train_documents = stats.num_train_documents;
  m.num_val_documents = stats.num_val_documents;
  m.created_by = std::string("hwtrain ") + HWTRAIN_VERSION;
  for (const CorpusFile& f : listing.files) {
    if (f.is_stdin()) {
      char hex[24];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(stdin_hash));
      m.sources.push_back({{"path", "-"}, {"bytes_and_crc32c", hex}});
    } else {
      m.sources.push_back({{"path", f.path.string()}, {"bytes", f.size}, {"mtime_ns", f.mtime_ns}});
    }
  }
  m.options = {{"document_separator", options.document_separator},
               {"max_document_bytes", options.max_document_bytes},
               {"format", input_format_name(options.format)},
               {"jsonl_field", options.jsonl_field},
               {"include", options.include},
               {"exclude", options.exclude}};
  // Order matters: tokenizer files and shards first, the manifest last (it makes the dataset).
  save_tokenizer(*tok, out.staging());
  m.shards = shards.commit(stats.fingerprint);
  write_manifest(out.staging(), m);
  out.commit();
  stats.num_shards = static_cast<int64_t>(m.shards.size());
  stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return stats;
}

bool is_dataset_output(const fs::path& output, const PrepareOptions& options) {
  return options.shard_tokens > 0 || output.extension() != ".hwt";
}

PrepareStats prepare(const std::vector<fs::path>& inputs, const fs::path& output, const PrepareOptions& options) {
  return is_dataset_output(output, options) ? prepare_dataset(inputs, output, options)
                                            : prepare_token_file(inputs, output, options);
}

std::string describe(const PrepareStats& s) {
  std::ostringstream out;
  out << s.num_files << " files, " << s.num_documents << " documents (" << s.num_train_documents << " train, "
      << s.num_val_documents << " val), " << format_bytes(static_cast<double>(s.num_bytes)) << " -> "
      << s.num_train_tokens << " train + " << s.num_val_tokens << " val tokens";
  if (s.sharded) out << " in " << s.num_shards << " shards";
  out << " in " << s.seconds << " s";
  if (s.num_bytes > 0 && s.seconds > 0) {
    out << " (" << format_bytes(static_cast<double>(s.num_bytes) / s.seconds) << "/s)";
  }
  if (s.num_bad_lines > 0) out << ", " << s.num_bad_lines << " bad JSONL lines skipped";
  if (s.num_skipped_files > 0) out << ", " << s.num_skipped_files << " files skipped (hidden, binary or not regular)";
  if (s.num_filtered_files > 0) out << ", " << s.num_filtered_files << " left out by --include/--exclude";
  return out.str();
}

}  // namespace hwt
