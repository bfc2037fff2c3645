#include "hwtrain/train/trainer_state_file.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "hwtrain/core/error.h"
#include "hwtrain/core/json_integer.h"

namespace hwt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

class Reader {
 public:
  Reader(const json& root, const fs::path& file) : root_(root), file_(file) {}

  [[noreturn]] void bad(const std::string& key, const std::string& found, const std::string& valid) const {
    throw IoError(file_.string() + ": \"" + key + "\" is " + found + "; valid: " + valid +
                  " (the checkpoint is corrupt or was edited; use an earlier checkpoint)");
  }

  // The value at a dotted key ("dataset.vocab_size"), or nullptr when absent.
  const json* find(const std::string& key) const {
    const json* node = &root_;
    size_t start = 0;
    while (true) {
      const size_t dot = key.find('.', start);
      const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!node->is_object() || !node->contains(part)) return nullptr;
      node = &(*node)[part];
      if (dot == std::string::npos) return node;
      start = dot + 1;
    }
  }

  const json& need(const std::string& key, const std::string& valid) const {
    const json* v = find(key);
    if (!v) bad(key, "missing", valid);
    return *v;
  }

  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const {
    const std::string valid = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    const json& v = need(key, valid);
    if (!v.is_number_integer()) bad(key, v.dump() + " (" + v.type_name() + ")", valid);
    if (!is_json_integer_in(v, lo, hi)) bad(key, v.dump(), valid);
    return v.get<int64_t>();
  }

  double number(const std::string& key, double lo, double hi, bool lo_open) const {
    std::ostringstream valid_text;
    valid_text << "a finite number in " << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
    const std::string valid = valid_text.str();
    const json& v = need(key, valid);
    if (!v.is_number()) bad(key, v.dump() + " (" + v.type_name() + ")", valid);
    const double x = v.get<double>();
    if (!std::isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi) bad(key, v.dump(), valid);
    return x;
  }

  std::string string(const std::string& key, bool required) const {
    const json* v = find(key);
    if (!v && !required) return "";
    if (!v) bad(key, "missing", "a string");
    if (!v->is_string()) bad(key, v->dump() + " (" + v->type_name() + ")", "a string");
    return v->get<std::string>();
  }

 private:
  const json& root_;
  const fs::path& file_;
};

// "callbacks": {"<name>": {"<key>": number, ...}, ...}, bounded (kMaxCallbackStates).
std::map<std::string, std::map<std::string, double>> callback_states(const Reader& r, const json& c) {
  const std::string valid = "an object of at most " + std::to_string(kMaxCallbackStates) +
                            " callbacks, each an object of at most as many finite numbers (names under 256 characters)";
  if (!c.is_object() || c.size() > kMaxCallbackStates)
    r.bad("callbacks", c.is_object() ? "too large" : c.dump(), valid);
  std::map<std::string, std::map<std::string, double>> out;
  for (const auto& [name, values] : c.items()) {
    if (name.size() > 256 || !values.is_object() || values.size() > kMaxCallbackStates) {
      r.bad("callbacks." + name.substr(0, 64), values.is_object() ? "too large" : values.dump().substr(0, 64), valid);
    }
    for (const auto& [key, v] : values.items()) {
      if (key.size() > 256 || !v.is_number() || !std::isfinite(v.get<double>())) {
        r.bad("callbacks." + name + "." + key.substr(0, 64), v.dump().substr(0, 64), valid);
      }
      out[name][key] = v.get<double>();
    }
  }
  return out;
}

}  // namespace

TrainerStateFile parse_trainer_state(const json& j, const fs::path& file) {
  Reader r(j, file);
  if (!j.is_object()) r.bad("(top level)", std::string(j.type_name()), "a JSON object");
  if (r.find("format_version")) r.integer("format_version", 1, 1);
  TrainerStateFile s;
  s.step = r.integer("step", 0, kMaxResumeStep);
  s.tokens_seen = r.integer("tokens_seen", 0, kMaxResumeTokens);
  s.elapsed_seconds = r.number("elapsed_seconds", 0, 1e12, false);
  if (const json* loader = r.find("loader")) {
    try {
      s.loader = LoaderState::from_json(*loader);
    } catch (const DataError&) {
      r.bad("loader", loader->dump(), std::string("{\"seed\": \"<hex>\", \"epoch\": N >= 0, \"position\": N >= 0}"));
    }
  } else {
    s.sampler_position = r.integer("sampler_position", 0, std::numeric_limits<int64_t>::max());
  }
  s.lr_scale = r.number("lr_scale", 0, 1, true);
  s.micro_batch_size = r.integer("micro_batch_size", 1, kMaxResumeBatch);
  s.grad_accum_steps = r.integer("grad_accum_steps", 1, kMaxResumeBatch);
  s.world_size = r.find("world_size") ? r.integer("world_size", 1, kMaxResumeBatch) : 1;
  s.dataset_tokenizer = r.string("dataset.tokenizer", true);
  s.dataset_vocab_size = r.integer("dataset.vocab_size", 0, int64_t{1} << 32);  // 0: user examples
  const json& fingerprint = r.need("dataset.fingerprint", "an unsigned 64-bit integer");
  if (!fingerprint.is_number_unsigned()) r.bad("dataset.fingerprint", fingerprint.dump(), "an unsigned 64-bit integer");
  s.dataset_fingerprint = fingerprint.get<uint64_t>();
  if (const json* p = r.find("precision"); p && !p->is_object()) r.bad("precision", p->dump(), "a JSON object");
  s.precision_fallback_reason = r.string("precision.fallback_reason", false);
  if (const json* c = r.find("callbacks")) s.callbacks = callback_states(r, *c);
  return s;
}

}  // namespace hwt
