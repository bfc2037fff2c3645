#include "hwtrain/config/run_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <regex>
#include <sstream>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"

namespace hwt {

namespace {

// A value before it meets its field: typed (from TOML) or text (from --set).
struct RawValue {
  enum class Kind { Int, Float, Bool, String, Text };
  Kind kind = Kind::Text;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  std::string describe() const {
    switch (kind) {
      case Kind::Int: return std::to_string(i);
      case Kind::Float: { std::ostringstream o; o << d; return o.str(); }
      case Kind::Bool: return b ? "true" : "false";
      case Kind::String: return "\"" + s + "\"";
      case Kind::Text: return "'" + s + "'";
    }
    return s;
  }
};


[[noreturn]] void wrong_type(const std::string& key, const RawValue& v, const std::string& want,
                             const std::string& source) {
  throw ConfigError(source + ": " + key + " = " + v.describe() + " has the wrong type: expected " + want);
}

void assign(int64_t& f, const RawValue& v, const std::string& key, const std::string& src) {
  if (v.kind == RawValue::Kind::Int) { f = v.i; return; }
  if (v.kind == RawValue::Kind::Text) {
    errno = 0;
    char* end = nullptr;
    long long x = std::strtoll(v.s.c_str(), &end, 10);
    if (!v.s.empty() && end && *end == '\0' && errno == 0) { f = x; return; }
  }
  wrong_type(key, v, "an integer", src);
}
void assign(double& f, const RawValue& v, const std::string& key, const std::string& src) {
  if (v.kind == RawValue::Kind::Int) { f = static_cast<double>(v.i); return; }
  if (v.kind == RawValue::Kind::Float) { f = v.d; return; }
  if (v.kind == RawValue::Kind::Text) {
    errno = 0;
    char* end = nullptr;
    double x = std::strtod(v.s.c_str(), &end);
    if (!v.s.empty() && end && *end == '\0' && errno == 0 && std::isfinite(x)) { f = x; return; }
  }
  wrong_type(key, v, "a number", src);
}
void assign(bool& f, const RawValue& v, const std::string& key, const std::string& src) {
  if (v.kind == RawValue::Kind::Bool) { f = v.b; return; }
  if (v.kind == RawValue::Kind::Text) {
    if (v.s == "true" || v.s == "1" || v.s == "on" || v.s == "yes") { f = true; return; }
    if (v.s == "false" || v.s == "0" || v.s == "off" || v.s == "no") { f = false; return; }
  }
  wrong_type(key, v, "true or false", src);
}
void assign(std::string& f, const RawValue& v, const std::string& key, const std::string& src) {
  if (v.kind == RawValue::Kind::String || v.kind == RawValue::Kind::Text) { f = v.s; return; }
  wrong_type(key, v, "a string", src);
}

// Finds the field `key` ("table.name") and assigns `value` to it.
struct Setter {
  std::string key, source;
  const RawValue* value = nullptr;
  std::string table_prefix;
  bool found = false;

  template <class T>
  void table(const std::string& name, T& options) {
    table_prefix = name + ".";
    options.visit(*this);
  }
  template <class F>
  void operator()(const std::string& name, F& field, const char* /*doc*/) {
    if (table_prefix + name != key) return;
    assign(field, *value, key, source);
    found = true;
  }
  void operator()(const std::string& name, std::string& field, const char* doc,
                  const std::vector<std::string>& choices) {
    if (table_prefix + name != key) return;
    std::string old = field;
    (*this)(name, field, doc);
    bool ok = false;
    for (const auto& c : choices) ok = ok || c == field;
    if (!ok) {
      field = old;
      std::vector<std::string> shown;
      for (const auto& c : choices) shown.push_back(c.empty() ? "\"\"" : c);
      throw ConfigError(source + ": " + key + " = " + value->describe() + " is not valid: expected one of " +
                        join(shown) + did_you_mean(value->s, choices));
    }
  }
};

struct KeyLister {
  std::vector<std::string> keys;
  std::string prefix;
  template <class T>
  void table(const std::string& name, T& options) {
    prefix = name + ".";
    options.visit(*this);
  }
  template <class F>
  void operator()(const std::string& name, F&, const char*) { keys.push_back(prefix + name); }
  template <class F>
  void operator()(const std::string& name, F&, const char*, const std::vector<std::string>&) {
    keys.push_back(prefix + name);
  }
};

struct TomlWriter {
  toml::table root;
  toml::table* current = nullptr;
  template <class T>
  void table(const std::string& name, T& options) {
    root.insert_or_assign(name, toml::table{});
    current = root[name].as_table();
    options.visit(*this);
  }
  template <class F>
  void operator()(const std::string& name, F& f, const char*) { current->insert_or_assign(name, f); }
  template <class F>
  void operator()(const std::string& name, F& f, const char*, const std::vector<std::string>&) {
    current->insert_or_assign(name, f);
  }
};

struct JsonWriter {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  nlohmann::ordered_json* current = nullptr;
  template <class T>
  void table(const std::string& name, T& options) {
    root[name] = nlohmann::ordered_json::object();
    current = &root[name];
    options.visit(*this);
  }
  template <class F>
  void operator()(const std::string& name, F& f, const char*) { (*current)[name] = f; }
  template <class F>
  void operator()(const std::string& name, F& f, const char*, const std::vector<std::string>&) {
    (*current)[name] = f;
  }
};

// The one error for a key no option has, wherever it was written (a TOML file or --set).
[[noreturn]] void unknown_key(const std::string& key, const std::string& source) {
  throw ConfigError(source + ": unknown key '" + key + "'" + did_you_mean(key, RunConfig::all_keys()) +
                    "; 'hwtrain train --help-config' lists every key");
}

void set_key(RunConfig& config, const std::string& key, const RawValue& value, const std::string& source);

RawValue text_value(const std::string& s) {
  RawValue v;
  v.s = s;
  return v;
}

// One choice, one key: the keys with which an older version spelled half of a choice still work,
// each use translated to today's key and noted (the CLI prints the notes as warnings).
bool apply_deprecated_key(RunConfig& config, const std::string& key, const RawValue& value, const std::string& source) {
  bool on = false;
  if (key == "optimization.enable_mixed_precision") {
    assign(on, value, key, source);
    if (!on) set_key(config, "optimization.mixed_precision_dtype", text_value("fp32"), source);
    config.deprecations.push_back(source + ": " + key + " is deprecated; use optimization.mixed_precision_dtype "
                                  "(fp32 = off, auto = the planner's choice)" + (on ? "" : ": read as fp32"));
    return true;
  }
  if (key == "optimization.enable_gradient_checkpointing") {
    assign(on, value, key, source);
    const int64_t every = on ? std::max<int64_t>(1, config.optimization.checkpoint_every) : 0;
    set_key(config, "optimization.checkpoint_every", text_value(std::to_string(every)), source);
    config.deprecations.push_back(source + ": " + key + " is deprecated; use optimization.checkpoint_every "
                                  "(k = every k-th block, 0 = off, -1 = the planner decides): true reads as every "
                                  "block or the k given, false as 0");
    return true;
  }
  return false;
}

void set_key(RunConfig& config, const std::string& key, const RawValue& value, const std::string& source) {
  if (apply_deprecated_key(config, key, value, source)) return;
  Setter setter;
  setter.key = key;
  setter.source = source;
  setter.value = &value;
  config.visit_tables(setter);
  if (!setter.found) unknown_key(key, source);
  config.explicit_keys.insert(key);
}

std::optional<RawValue> raw_from_toml(const toml::node& node) {
  RawValue r;
  if (auto v = node.as_integer()) {
    r.kind = RawValue::Kind::Int;
    r.i = v->get();
  } else if (auto v = node.as_floating_point()) {
    r.kind = RawValue::Kind::Float;
    r.d = v->get();
  } else if (auto v = node.as_boolean()) {
    r.kind = RawValue::Kind::Bool;
    r.b = v->get();
  } else if (auto v = node.as_string()) {
    r.kind = RawValue::Kind::String;
    r.s = v->get();
  } else {
    return std::nullopt;
  }
  return r;
}

// Flattens a TOML document into (key, value) pairs in document order of tables.
std::vector<std::pair<std::string, RawValue>> flatten(const toml::table& doc, const std::string& source) {
  std::vector<std::pair<std::string, RawValue>> out;
  for (const auto& [table_name, node] : doc) {
    std::string t(table_name.str());
    const toml::table* table = node.as_table();
    if (!table) unknown_key(t, source);  // every key is inside a table such as [train]
    for (const auto& [k, v] : *table) {
      std::string key = t + "." + std::string(k.str());
      auto raw = raw_from_toml(v);
      if (!raw) {
        const auto keys = RunConfig::all_keys();
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) unknown_key(key, source);
        throw ConfigError(source + ": " + key + " must be a number, boolean or string, not a " +
                          (v.is_table() ? "table" : v.is_array() ? "list" : "date or time"));
      }
      out.emplace_back(key, *raw);
    }
  }
  return out;
}

void apply_all(RunConfig& config, const std::vector<std::pair<std::string, RawValue>>& items,
               const std::string& source) {
  // The preset goes first, whatever its position, so that explicit model keys override it.
  for (const auto& [key, value] : items) {
    if (key == "model.preset") {
      set_key(config, key, value, source);
      config.apply_model_preset(config.model.preset);
    }
  }
  for (const auto& [key, value] : items) {
    if (key != "model.preset") set_key(config, key, value, source);
  }
}

[[noreturn]] void range_error(const std::string& key, const std::string& value, const std::string& valid) {
  throw ConfigError("config: " + key + " = " + value + " is out of range: " + valid);
}
template <class T>
std::string str(const T& v) {
  std::ostringstream o;
  o << v;
  return o.str();
}
void at_least(const std::string& key, int64_t v, int64_t min) {
  if (v < min) range_error(key, str(v), "must be at least " + str(min));
}
void in_range(const std::string& key, double v, double lo, double hi, bool hi_inclusive) {
  if (!(v >= lo) || (hi_inclusive ? v > hi : v >= hi)) {
    range_error(key, str(v), "must be in [" + str(lo) + ", " + str(hi) + (hi_inclusive ? "]" : ")"));
  }
}

}  // namespace

std::vector<std::string> RunConfig::all_keys() {
  RunConfig c;
  KeyLister lister;
  c.visit_tables(lister);
  return lister.keys;
}

void RunConfig::apply_model_preset(const std::string& name) {
  if (name.empty()) return;
  auto it = model_presets().find(name);
  if (it == model_presets().end()) {
    std::vector<std::string> names;
    for (const auto& p : model_presets()) names.push_back(p.first);
    throw ConfigError("config: model.preset = '" + name + "' is unknown: expected one of " + join(names) +
                      did_you_mean(name, names));
  }
  const ModelShape& s = it->second;
  if (!is_set("model.n_layer")) model.n_layer = s.n_layer;
  if (!is_set("model.n_head")) model.n_head = s.n_head;
  if (!is_set("model.n_embd")) model.n_embd = s.n_embd;
  if (!is_set("model.block_size")) model.block_size = s.block_size;
  model.preset = name;
}

void RunConfig::apply_toml(const std::string& toml_text, const std::string& source) {
  toml::table doc;
  try {
    doc = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw ConfigError(source + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) +
                      ": TOML syntax error: " + std::string(e.description()));
  }
  apply_all(*this, flatten(doc, source), source);
}

void RunConfig::apply_override(const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set '" + assignment + "': expected key=value, for example --set train.lr=1e-3");
  }
  std::string key = assignment.substr(0, eq);
  RawValue value;
  value.s = assignment.substr(eq + 1);
  apply_all(*this, {{key, value}}, "--set");
}

void RunConfig::validate() const {
  at_least("model.n_layer", model.n_layer, 1);
  at_least("model.n_head", model.n_head, 1);
  at_least("model.n_embd", model.n_embd, 1);
  at_least("model.block_size", model.block_size, 1);
  at_least("model.vocab_size", model.vocab_size, 0);
  if (model.n_embd % model.n_head != 0) {
    throw ConfigError("config: model.n_embd = " + str(model.n_embd) + " is not divisible by model.n_head = " +
                      str(model.n_head) + "; choose n_embd a multiple of n_head (e.g. " +
                      str((model.n_embd / model.n_head + 1) * model.n_head) + ")");
  }
  in_range("model.dropout", model.dropout, 0.0, 1.0, false);
  if (model.attention == "gemm" && model.dropout > 0) {
    throw ConfigError("config: model.attention = gemm has no attention dropout, but model.dropout = " +
                      str(model.dropout) + "; use model.attention = sdpa or math, or model.dropout = 0");
  }
  at_least("data.max_document_bytes", data.max_document_bytes, 0);
  in_range("data.val_fraction", data.val_fraction, 0.0, 0.5, true);
  if (data.val_fraction <= 0.0) range_error("data.val_fraction", str(data.val_fraction), "must be in (0, 0.5]");
  at_least("train.max_steps", train.max_steps, 1);
  if (train.time_budget < 0) range_error("train.time_budget", str(train.time_budget), "must be >= 0 (0 = no limit)");
  at_least("train.micro_batch_size", train.micro_batch_size, 1);
  at_least("train.grad_accum_steps", train.grad_accum_steps, 1);
  if (!(train.lr > 0)) range_error("train.lr", str(train.lr), "must be > 0");
  if (train.min_lr < 0 || train.min_lr > train.lr) {
    range_error("train.min_lr", str(train.min_lr), "must be in [0, train.lr = " + str(train.lr) + "]");
  }
  at_least("train.warmup_steps", train.warmup_steps, 0);
  at_least("train.decay_steps", train.decay_steps, 0);
  if (train.weight_decay < 0) range_error("train.weight_decay", str(train.weight_decay), "must be >= 0");
  in_range("train.beta1", train.beta1, 0.0, 1.0, false);
  in_range("train.beta2", train.beta2, 0.0, 1.0, false);
  if (!(train.eps > 0)) range_error("train.eps", str(train.eps), "must be > 0");
  if (train.grad_clip < 0) range_error("train.grad_clip", str(train.grad_clip), "must be >= 0 (0 = off)");
  at_least("train.eval_interval", train.eval_interval, 0);
  at_least("train.eval_batches", train.eval_batches, 1);
  at_least("train.log_interval", train.log_interval, 1);
  at_least("train.sample_tokens", train.sample_tokens, 0);
  if (!(train.sample_temperature > 0)) {
    range_error("train.sample_temperature", str(train.sample_temperature), "must be > 0");
  }
  at_least("train.sample_top_k", train.sample_top_k, 0);
  static const std::regex device_re("auto|cpu|cuda(:[0-9]+)?");
  if (!std::regex_match(train.device, device_re)) {
    throw ConfigError("config: train.device = '" + train.device + "' is not valid: expected auto, cpu, cuda or cuda:N");
  }
  at_least("checkpoint.interval", checkpoint.interval, 0);
  at_least("checkpoint.keep_last", checkpoint.keep_last, 1);
  at_least("optimization.checkpoint_every", optimization.checkpoint_every, -1);
  at_least("optimization.target_batch_size", optimization.target_batch_size, 0);
  at_least("optimization.max_batch_size", optimization.max_batch_size, 1);
  if (!(optimization.memory_threshold > 0 && optimization.memory_threshold <= 1)) {
    range_error("optimization.memory_threshold", str(optimization.memory_threshold), "must be in (0, 1]");
  }
  at_least("optimization.num_workers", optimization.num_workers, -1);
  at_least("optimization.prefetch_factor", optimization.prefetch_factor, 1);
  at_least("optimization.intra_op_threads", optimization.intra_op_threads, 0);
  if (optimization.optimizer_in_backward) {
    // Each of these needs every gradient before the first update (or several backward passes per
    // update); the planner checks the ones that depend on the machine (fp16, data parallel).
    auto conflict = [](const std::string& key, const std::string& value, const std::string& why) {
      throw ConfigError("config: optimization.optimizer_in_backward = true cannot run with " + key + " = " + value +
                        ": " + why);
    };
    if (train.grad_clip > 0) {
      conflict("train.grad_clip", str(train.grad_clip),
               "clipping by the global norm needs every gradient before any update; set train.grad_clip = 0");
    }
    if (train.grad_accum_steps > 1) {
      conflict("train.grad_accum_steps", std::to_string(train.grad_accum_steps),
               "each backward pass updates the weights; set train.grad_accum_steps = 1");
    }
    if (optimization.auto_batch_size) {
      conflict("optimization.auto_batch_size", "true",
               "the probe trades micro-batch for accumulation; set train.micro_batch_size instead");
    }
    if (optimization.mixed_precision_dtype == "fp16") {
      conflict("optimization.mixed_precision_dtype", "fp16",
               "loss scaling must see every gradient before it may skip a step; use bf16 or fp32");
    }
  }
  if (!(log.flush_seconds > 0)) range_error("log.flush_seconds", str(log.flush_seconds), "must be > 0");
  if (log.gpu_log_interval < 0) range_error("log.gpu_log_interval", str(log.gpu_log_interval), "must be >= 0 (0 = off)");
  static const std::regex steps_re("([0-9]+):([0-9]+)");
  std::smatch m;
  if (!log.profile_steps.empty() &&
      (!std::regex_match(log.profile_steps, m, steps_re) || std::stoll(m[1]) > std::stoll(m[2]))) {
    throw ConfigError("config: log.profile_steps = '" + log.profile_steps + "' is not valid: expected a:b with a <= b, e.g. 10:20");
  }
  if (!(dist.bucket_size_mb > 0)) range_error("dist.bucket_size_mb", str(dist.bucket_size_mb), "must be > 0");
  if (!(dist.timeout > 0)) range_error("dist.timeout", str(dist.timeout), "must be > 0 seconds");
}

std::string RunConfig::to_toml() const {
  TomlWriter w;
  const_cast<RunConfig*>(this)->visit_tables(w);
  std::ostringstream out;
  out << toml::toml_formatter(w.root, toml::format_flags::none) << "\n";
  return out.str();
}

std::string RunConfig::to_json() const {
  JsonWriter w;
  const_cast<RunConfig*>(this)->visit_tables(w);
  return w.root.dump(2);
}

RunConfig load_run_config(const std::string& config_file, const std::vector<std::string>& overrides) {
  RunConfig config;
  if (!config_file.empty()) {
    std::string text;
    try {
      text = read_file(config_file);
    } catch (const IoError& e) {
      throw ConfigError(std::string("cannot read config file: ") + e.what());
    }
    config.apply_toml(text, config_file);
  }
  for (const auto& o : overrides) config.apply_override(o);
  config.validate();
  return config;
}

}  // namespace hwt
