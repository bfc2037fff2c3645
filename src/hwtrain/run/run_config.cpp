#include "hwtrain/run/run_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "hwtrain/run/config_values.h"
#include "hwtrain/run/config_writers.h"
#include "hwtrain/sweep/toml_text.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/core/strings.h"

namespace hwt {

using config_writers::DocumentedTomlWriter;
using config_writers::JsonWriter;
using config_writers::KeyLister;
using config_writers::TomlWriter;
using config_values::assign;
using config_values::RawValue;
using config_values::Setter;

namespace {

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

// optimization.amp_level: Apex's O0-O3 names (the seeds' API) for hwtrain's precision settings.
// Not a field of its own: it sets the keys it names, which the resolved config then shows.
bool apply_amp_level(RunConfig& config, const RawValue& value, const std::string& source) {
  std::string level;
  assign(level, value, "optimization.amp_level", source);
  std::vector<std::pair<std::string, std::string>> sets;
  if (level == "O0") {
    sets = {{"optimization.mixed_precision_dtype", "fp32"}};
  } else if (level == "O1") {
    sets = {{"optimization.mixed_precision_dtype", "auto"}};
  } else if (level == "O2") {
    sets = {{"optimization.mixed_precision_dtype", "bf16"}, {"optimization.pure_bf16_weights", "true"}};
  } else if (level == "O3") {  // pure low precision: no fp32 copy of anything
    sets = {{"optimization.mixed_precision_dtype", "bf16"},
            {"optimization.pure_bf16_weights", "true"},
            {"optimization.optimizer_state_dtype", "int8"}};
  } else {
    throw ConfigError(source + ": optimization.amp_level = '" + level + "' is not valid: expected O0 (fp32), O1 "
                      "(autocast, the planner's precision), O2 (bf16 weights, fp32 moments) or O3 (bf16 weights, "
                      "8-bit moments)" +
                      did_you_mean(level, {"O0", "O1", "O2", "O3"}));
  }
  std::string read_as;
  for (const auto& [k, v] : sets) {
    set_key(config, k, text_value(v), source);
    read_as += (read_as.empty() ? "" : ", ") + k + " = " + v;
  }
  config.alias_notes.push_back(source + ": optimization.amp_level = " + level + " read as " + read_as);
  if (level == "O3") {
    config.alias_notes.push_back("optimization.amp_level = O3 keeps no fp32 copy of anything (weights and gradients "
                                 "bf16, AdamW moments 8-bit): an update smaller than bf16's spacing (about 1/256 "
                                 "of the weight) is lost and the moments carry quantization noise, so late-training "
                                 "progress can stall where O2 (fp32 moments) keeps going; use O2 when memory allows");
  }
  return true;
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
  if (key == "optimization.amp_level") return apply_amp_level(config, value, source);
  if (key == "dist.zero1") {
    assign(on, value, key, source);
    set_key(config, "dist.sharding", text_value(on ? "zero1" : "none"), source);
    config.deprecations.push_back(source + ": " + key + " is deprecated; use dist.sharding = none | zero1 | zero2 | "
                                  "zero3 | auto: read as dist.sharding = " + (on ? "zero1" : "none"));
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

// Each of these needs every gradient before the first update (or several backward passes per
// update); the planner checks the ones that depend on the machine (fp16 planned, data parallel).
void validate_optimizer_in_backward(const RunConfig& c) {
  auto conflict = [](const std::string& key, const std::string& value, const std::string& why) {
    throw ConfigError("config: optimization.optimizer_in_backward = true cannot run with " + key + " = " + value +
                      ": " + why);
  };
  if (c.train.grad_clip > 0) {
    conflict("train.grad_clip", option_text(c.train.grad_clip),
             "clipping by the global norm needs every gradient before any update; set train.grad_clip = 0");
  }
  if (c.train.grad_accum_steps > 1) {
    conflict("train.grad_accum_steps", std::to_string(c.train.grad_accum_steps),
             "each backward pass updates the weights; set train.grad_accum_steps = 1");
  }
  if (c.optimization.auto_batch_size) {
    conflict("optimization.auto_batch_size", "true",
             "the probe trades micro-batch for accumulation; set train.micro_batch_size instead");
  }
  if (c.optimization.mixed_precision_dtype == Precision::Fp16) {
    conflict("optimization.mixed_precision_dtype", "fp16",
             "loss scaling must see every gradient before it may skip a step; use bf16 or fp32");
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
  if (!is_set("model.architecture")) model.architecture = s.architecture;
  if (!is_set("model.bias")) model.bias = s.bias;
  if (s.architecture == Architecture::kLlama) {
    if (!is_set("model.n_kv_head")) model.n_kv_head = s.n_kv_head;
    if (!is_set("model.intermediate_size")) model.intermediate_size = s.intermediate_size;
    if (!is_set("model.vocab_size") && s.vocab_size > 0) model.vocab_size = s.vocab_size;
    if (!is_set("model.rope_theta")) model.rope_theta = s.rope_theta;
    if (!is_set("model.rope_scaling")) model.rope_scaling = s.rope_scaling;
    if (!is_set("model.rope_scaling_factor")) model.rope_scaling_factor = s.rope_scaling_factor;
    if (!is_set("model.rms_norm_eps")) model.rms_norm_eps = s.rms_norm_eps;
    if (!is_set("model.tie_word_embeddings")) model.tie_word_embeddings = s.tie_word_embeddings;
  }
  model.preset = name;
}

void RunConfig::apply_toml(const std::string& toml_text, const std::string& source) {
  apply_all(*this, flatten(sweep::parse_toml_text(toml_text, source), source), source);
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

// Each table checks its own fields (validate() next to them); here only what spans tables.
void RunConfig::validate() const {
  model.validate();
  data.validate();
  train.validate();
  checkpoint.validate();
  optimization.validate();
  log.validate();
  dist.validate();
  // The callbacks' tables check their ranges whether or not they are enabled: a bad value is refused
  // where it is written, not when the table is switched on later.
  early_stopping.validate();
  lr_plateau.validate();
  lr_monitor.validate();
  if (optimization.optimizer_in_backward) validate_optimizer_in_backward(*this);
}

std::string RunConfig::to_toml() const {
  TomlWriter w;
  const_cast<RunConfig*>(this)->visit_tables(w);
  std::ostringstream out;
  out << toml::toml_formatter(w.root, toml::format_flags::none) << "\n";
  return out.str();
}

std::string RunConfig::to_documented_toml() const {
  DocumentedTomlWriter w;
  const_cast<RunConfig*>(this)->visit_tables(w);
  return w.out.str();
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
