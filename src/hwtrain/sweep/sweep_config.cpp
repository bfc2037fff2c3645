#include "hwtrain/sweep/sweep_config.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <toml++/toml.h>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/sweep/grid_sampler.h"
#include "hwtrain/sweep/toml_text.h"

namespace hwt::sweep {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string>& sweep_top_keys() {
  static const std::vector<std::string> keys = {
      "study",   "base_config", "out_dir",   "trials",    "time_budget_seconds", "sampler", "pruner", "seed",
      "parallel", "objective",  "direction", "at_step",   "asha",                "median",  "tpe",    "space"};
  return keys;
}
const std::vector<std::string>& sweep_sub_keys(const std::string& table) {
  static const std::vector<std::string> asha = {"min_resource", "reduction_factor", "min_early_stopping_rate"};
  static const std::vector<std::string> median = {"n_startup_trials", "n_warmup_steps", "interval_steps",
                                                  "include_pruned_trials"};
  static const std::vector<std::string> tpe = {"n_startup_trials", "n_ei_candidates", "gamma_fraction", "gamma_max"};
  return table == "asha" ? asha : table == "median" ? median : tpe;
}
const std::vector<std::string>& space_spec_keys() {
  static const std::vector<std::string> keys = {"type", "low", "high", "log", "grid_points", "values"};
  return keys;
}

// Reads typed values out of the [sweep] table; every message starts with where the key came from.
class SweepTableReader {
 public:
  SweepTableReader(std::string file, std::set<std::string> overridden)
      : file_(std::move(file)), overridden_(std::move(overridden)) {}

  std::string where(const std::string& key) const { return overridden_.count(key) ? "--set " + key : file_ + ": " + key; }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ConfigError(where(key) + " " + what);
  }

  void check_known(const toml::table& t, const std::string& prefix, const std::vector<std::string>& valid) const {
    for (const auto& [k, v] : t) {
      const std::string name(k.str());
      if (std::find(valid.begin(), valid.end(), name) != valid.end()) continue;
      throw ConfigError(where(prefix + name) + " is not a sweep option" + did_you_mean(name, valid) +
                        "; valid in [" + prefix.substr(0, prefix.size() - 1) + "]: " + join(valid));
    }
  }

  std::int64_t integer(const toml::table& t, const std::string& prefix, const std::string& name,
                       std::int64_t fallback, std::int64_t min_value) const {
    const toml::node* n = t.get(name);
    if (!n) return fallback;
    const auto v = n->value<std::int64_t>();
    if (!n->is_integer() || !v) fail(prefix + name, "must be an integer, not " + describe(*n));
    if (*v < min_value) fail(prefix + name, "= " + std::to_string(*v) + " is out of range: must be at least " + std::to_string(min_value));
    return *v;
  }
  double real(const toml::table& t, const std::string& key, double fallback) const {
    const toml::node* n = t.get(key.substr(key.rfind('.') + 1));
    if (!n) return fallback;
    if (!n->is_number()) fail(key, "must be a number, not " + describe(*n));
    const double v = *n->value<double>();
    if (!std::isfinite(v)) fail(key, "must be a finite number, not " + format_number("%g", v));
    return v;
  }
  bool boolean(const toml::table& t, const std::string& key, bool fallback) const {
    const toml::node* n = t.get(key.substr(key.rfind('.') + 1));
    if (!n) return fallback;
    if (!n->is_boolean()) fail(key, "must be true or false, not " + describe(*n));
    return *n->value<bool>();
  }
  std::string text(const toml::table& t, const std::string& key, const std::string& fallback) const {
    const toml::node* n = t.get(key.substr(key.rfind('.') + 1));
    if (!n) return fallback;
    if (!n->is_string()) fail(key, "must be a string, not " + describe(*n));
    return *n->value<std::string>();
  }
  std::string one_of(const toml::table& t, const std::string& key, const std::string& fallback,
                      const std::vector<std::string>& valid) const {
    const std::string v = text(t, key, fallback);
    if (std::find(valid.begin(), valid.end(), v) == valid.end()) {
      fail(key, "= '" + v + "' is not valid: expected one of " + join(valid) + did_you_mean(v, valid));
    }
    return v;
  }

  static std::string describe(const toml::node& n) {
    if (n.is_string()) return "the string \"" + *n.value<std::string>() + "\"";
    if (n.is_table()) return "a table";
    if (n.is_array()) return "a list";
    if (n.is_boolean()) return std::string("the boolean ") + (*n.value<bool>() ? "true" : "false");
    if (n.is_floating_point()) return "the real " + format_number("%g", *n.value<double>());
    if (n.is_integer()) return "the integer " + std::to_string(*n.value<std::int64_t>());
    return "a date or time";
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::set<std::string> overridden_;
};

// "sweep.trials=8" -> [sweep] trials = 8; the value is a TOML value when it parses as one.
std::string apply_sweep_override(toml::table& sweep, const std::string& assignment) {
  const auto eq = assignment.find('=');
  const std::string key = eq == std::string::npos ? assignment : assignment.substr(0, eq);
  if (eq == std::string::npos || key.rfind("sweep.", 0) != 0 || key.size() == 6) {
    throw ConfigError("--set '" + assignment + "': expected sweep.key=value, for example --set sweep.trials=8");
  }
  std::vector<std::string> parts;
  for (std::size_t start = 6;;) {
    const auto dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts[0] == "space") {
    throw ConfigError("--set " + key + ": the search space cannot be changed with --set; edit [sweep.space] in the sweep file");
  }
  const bool sub = parts.size() == 2 && (parts[0] == "asha" || parts[0] == "median" || parts[0] == "tpe");
  if (parts.size() > 2 || (parts.size() == 2 && !sub)) {
    throw ConfigError("--set " + key + " is not a sweep option: expected sweep.<key> or sweep.<asha|median|tpe>.<key>");
  }
  const std::string text = assignment.substr(eq + 1);
  toml::table value_doc;
  bool parsed = false;
  try {
    value_doc = toml::parse("v = " + text);
    parsed = value_doc.size() == 1 && value_doc.contains("v");
  } catch (const toml::parse_error&) {
  }
  toml::table* target = &sweep;
  if (sub) {
    if (!sweep.contains(parts[0])) sweep.insert(parts[0], toml::table{});
    target = sweep.get(parts[0])->as_table();
    if (!target) throw ConfigError("--set " + key + ": sweep." + parts[0] + " is not a table in the sweep file");
  }
  if (parsed) {
    target->insert_or_assign(parts.back(), *value_doc.get("v"));
  } else {
    target->insert_or_assign(parts.back(), text);
  }
  return key;
}

// A choice literal as hwtrain's --set will read it: "bf16", "4", "0.1", "true".
std::string choice_literal(const SweepTableReader& r, const std::string& key, const toml::node& n) {
  if (n.is_string()) return *n.value<std::string>();
  if (n.is_integer()) return std::to_string(*n.value<std::int64_t>());
  if (n.is_floating_point()) return to_override_value(*n.value<double>());
  if (n.is_boolean()) return *n.value<bool>() ? "true" : "false";
  r.fail(key, "lists " + SweepTableReader::describe(n) + ": choices must be strings, numbers or booleans");
}

ParamSpec parse_param_spec(const SweepTableReader& r, const std::string& key, const toml::table& t,
                           const SweepKeyChecks& checks) {
  const std::string pre = "sweep.space.\"" + key + "\".";
  r.check_known(t, pre, space_spec_keys());
  if (checks.is_config_key && !checks.is_config_key(key)) {
    throw ConfigError(r.file() + ": sweep.space.\"" + key + "\" is not an hwtrain config key" +
                      did_you_mean(key, checks.all_config_keys) + "; see `hwtrain train --help-config` for the keys");
  }
  ParamSpec p;
  p.key = key;
  const std::string type =
      r.one_of(t, pre + "type", "", {"uniform", "log_uniform", "loguniform", "int", "choice"});
  p.kind = type == "choice" ? ParamKind::kChoice
           : type == "int"  ? ParamKind::kInt
           : type == "uniform" ? ParamKind::kUniform
                               : ParamKind::kLogUniform;
  p.grid_points = static_cast<int>(r.integer(t, pre, "grid_points", 0, 0));
  if (p.kind == ParamKind::kChoice) {
    if (t.contains("low") || t.contains("high") || t.contains("log")) {
      r.fail(pre + (t.contains("low") ? "low" : t.contains("high") ? "high" : "log"),
             "is not used by type = \"choice\": list the choices in values = [...]");
    }
    const toml::node* values = t.get("values");
    if (!values || !values->is_array()) r.fail(pre + "values", "must be a list of choices, e.g. values = [\"bf16\", \"fp32\"]");
    for (const auto& v : *values->as_array()) p.choices.push_back(choice_literal(r, pre + "values", v));
    return p;
  }
  if (t.contains("values")) r.fail(pre + "values", "is only for type = \"choice\"; a " + type + " range takes low and high");
  if (!t.contains("low") || !t.contains("high")) {
    r.fail(pre + (t.contains("low") ? "high" : "low"), "is missing: a " + type + " range needs low and high");
  }
  p.low = r.real(t, pre + "low", 0.0);
  p.high = r.real(t, pre + "high", 0.0);
  p.log = r.boolean(t, pre + "log", false);
  if (p.log && p.kind != ParamKind::kInt) r.fail(pre + "log", "is only for type = \"int\"; use type = \"log_uniform\" for a real");
  return p;
}

// [sweep.space."train.lr"] or, unquoted, [sweep.space.train.lr]: a table with `type` is one
// parameter; a table without it groups the keys below it.
// Tables are visited in file order (toml++ iterates by key): the grid varies the first key slowest.
void parse_space(const SweepTableReader& r, const toml::table& space, const std::string& prefix,
                 const SweepKeyChecks& checks, SearchSpace& out) {
  std::vector<std::pair<std::string, const toml::node*>> entries;
  for (const auto& [k, v] : space) entries.emplace_back(std::string(k.str()), &v);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const auto& pa = a.second->source().begin;
    const auto& pb = b.second->source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
  });
  for (const auto& [name, node] : entries) {
    const std::string key = prefix + name;
    const toml::table* t = node->as_table();
    if (!t) r.fail("sweep.space.\"" + key + "\"", "must be a table such as {type = \"uniform\", low = 0, high = 1}");
    if (t->contains("type")) {
      out.params.push_back(parse_param_spec(r, key, *t, checks));
    } else if (t->empty() || t->contains("low") || t->contains("high") || t->contains("values") ||
               t->contains("log") || t->contains("grid_points")) {  // a spec without its type, not a group
      r.fail("sweep.space.\"" + key + "\".type", "is missing: give uniform, log_uniform, int or choice");
    } else {
      parse_space(r, *t, key + ".", checks, out);
    }
  }
}

// Runs an options struct's validate(), whose message starts "config: ", with the sweep file's name.
template <class F>
void with_file(const std::string& file, F&& validate) {
  try {
    validate();
  } catch (const ConfigError& e) {
    std::string m = e.what();
    if (m.rfind("config: ", 0) == 0) m = m.substr(8);
    throw ConfigError(file + ": " + m);
  }
}

fs::path resolve_path(const fs::path& base_dir, const std::string& p) {
  fs::path path(p);
  if (path.is_relative()) path = base_dir / path;
  return fs::absolute(path).lexically_normal();
}

void read_sub_tables(const SweepTableReader& r, const toml::table& s, SweepConfig& c) {
  const auto sub = [&](const char* name) -> const toml::table& {
    static const toml::table empty;
    const toml::node* n = s.get(name);
    if (!n) return empty;
    if (!n->is_table()) r.fail(std::string("sweep.") + name, "must be a table ([sweep." + std::string(name) + "])");
    r.check_known(*n->as_table(), std::string("sweep.") + name + ".", sweep_sub_keys(name));
    return *n->as_table();
  };
  const toml::table& asha = sub("asha");
  c.asha.min_resource = r.integer(asha, "sweep.asha.", "min_resource", c.asha.min_resource, 1);
  c.asha.reduction_factor = r.integer(asha, "sweep.asha.", "reduction_factor", c.asha.reduction_factor, 2);
  c.asha.min_early_stopping_rate = r.integer(asha, "sweep.asha.", "min_early_stopping_rate", 0, 0);
  const toml::table& median = sub("median");
  c.median.n_startup_trials = static_cast<int>(r.integer(median, "sweep.median.", "n_startup_trials", c.median.n_startup_trials, 0));
  c.median.n_warmup_steps = r.integer(median, "sweep.median.", "n_warmup_steps", c.median.n_warmup_steps, 0);
  c.median.interval_steps = r.integer(median, "sweep.median.", "interval_steps", c.median.interval_steps, 1);
  c.median.include_pruned_trials = r.boolean(median, "sweep.median.include_pruned_trials", false);
  const toml::table& tpe = sub("tpe");
  c.tpe.n_startup_trials = static_cast<int>(r.integer(tpe, "sweep.tpe.", "n_startup_trials", c.tpe.n_startup_trials, 0));
  c.tpe.n_ei_candidates = static_cast<int>(r.integer(tpe, "sweep.tpe.", "n_ei_candidates", c.tpe.n_ei_candidates, 1));
  c.tpe.gamma_fraction = r.real(tpe, "sweep.tpe.gamma_fraction", c.tpe.gamma_fraction);
  c.tpe.gamma_max = static_cast<int>(r.integer(tpe, "sweep.tpe.", "gamma_max", c.tpe.gamma_max, 1));
  with_file(r.file(), [&] { c.asha.validate(); });
  with_file(r.file(), [&] { c.median.validate(); });
  with_file(r.file(), [&] { c.tpe.validate(); });
}

void read_top_keys(const SweepTableReader& r, const toml::table& s, const SweepKeyChecks& checks, SweepConfig& c) {
  c.trials = static_cast<int>(r.integer(s, "sweep.", "trials", c.trials, 1));
  c.time_budget_seconds = r.real(s, "sweep.time_budget_seconds", 0.0);
  if (c.time_budget_seconds < 0) r.fail("sweep.time_budget_seconds", "must be >= 0 (0 = no time limit)");
  c.sampler = *enum_from_name<SamplerKind>(r.one_of(s, "sweep.sampler", "tpe", enum_choices<SamplerKind>()));
  c.pruner = *enum_from_name<PrunerKind>(r.one_of(s, "sweep.pruner", "none", enum_choices<PrunerKind>()));
  c.seed = static_cast<std::uint64_t>(r.integer(s, "sweep.", "seed", 0, 0));
  c.parallel = static_cast<int>(r.integer(s, "sweep.", "parallel", 0, 0));
  c.objective = r.text(s, "sweep.objective", c.objective);
  const auto& metrics = checks.metric_names;
  if (!metrics.empty() && std::find(metrics.begin(), metrics.end(), c.objective) == metrics.end()) {
    r.fail("sweep.objective", "= '" + c.objective + "' is not a metric" + did_you_mean(c.objective, metrics) +
                                  "; available: " + join(metrics));
  }
  c.direction = *enum_from_name<Direction>(r.one_of(s, "sweep.direction", "min", enum_choices<Direction>()));
  c.at_step = r.integer(s, "sweep.", "at_step", 0, 0);
}

}  // namespace


SweepConfig parse_sweep_config(const std::string& toml_text, const fs::path& sweep_file,
                               const std::vector<std::string>& overrides, const SweepKeyChecks& checks) {
  const std::string file = sweep_file.empty() ? std::string("sweep file") : sweep_file.string();
  toml::table doc = parse_toml_text(toml_text, file);
  for (const auto& [k, v] : doc) {
    if (k.str() != "sweep") {
      throw ConfigError(file + ": unknown table [" + std::string(k.str()) +
                        "]: a sweep file holds [sweep] only; put train settings in sweep.base_config");
    }
  }
  if (!doc.contains("sweep")) doc.insert("sweep", toml::table{});
  toml::table* sweep = doc.get("sweep")->as_table();
  if (!sweep) throw ConfigError(file + ": sweep must be a table ([sweep])");
  std::set<std::string> overridden;
  for (const auto& o : overrides) overridden.insert(apply_sweep_override(*sweep, o));

  const SweepTableReader r(file, overridden);
  r.check_known(*sweep, "sweep.", sweep_top_keys());
  SweepConfig c;
  c.sweep_file = sweep_file;
  const fs::path base_dir = sweep_file.empty() ? fs::current_path() : fs::absolute(sweep_file).parent_path();
  const std::string study = r.text(*sweep, "sweep.study", "sweep.db");
  if (study.empty()) r.fail("sweep.study", "is empty: name the study file, e.g. \"sweep.db\"");
  c.study = resolve_path(base_dir, study);
  std::error_code ec;
  if (fs::exists(c.study, ec) && fs::is_directory(c.study, ec)) {
    r.fail("sweep.study", "= '" + c.study.string() + "' is a directory; name the study file, e.g. \"sweep.db\"");
  }
  const std::string base = r.text(*sweep, "sweep.base_config", "");
  if (!base.empty()) {
    c.base_config = resolve_path(base_dir, base);
    if (!fs::is_regular_file(c.base_config)) {
      r.fail("sweep.base_config", "= '" + base + "': no such file (looked for " + c.base_config.string() + ")");
    }
  }
  const std::string out = r.text(*sweep, "sweep.out_dir", "");
  c.out_dir = out.empty() ? c.study.parent_path() / c.study.stem() : resolve_path(base_dir, out);
  if (c.out_dir == c.study) r.fail("sweep.out_dir", "names the study file itself; choose a directory");
  if (fs::exists(c.out_dir, ec) && !fs::is_directory(c.out_dir, ec)) {
    r.fail("sweep.out_dir", "= '" + c.out_dir.string() + "' is a file, not a directory; choose a directory");
  }
  read_top_keys(r, *sweep, checks, c);
  read_sub_tables(r, *sweep, c);

  const toml::node* space = sweep->get("space");
  if (space && !space->is_table()) r.fail("sweep.space", "must be a table of [sweep.space.\"<config key>\"] tables");
  if (space) parse_space(r, *space->as_table(), "", checks, c.space);
  if (c.space.params.empty()) {
    throw ConfigError(file + ": sweep.space is empty: add a table per searched key, e.g. "
                             "[sweep.space.\"train.lr\"] type = \"log_uniform\" low = 1e-4 high = 3e-3");
  }
  with_file(file, [&] { c.space.validate(); });
  if (c.sampler == SamplerKind::kGrid) with_file(file, [&] { (void)GridSampler::size(c.space); });
  return c;
}

SweepConfig load_sweep_config(const fs::path& sweep_file, const std::vector<std::string>& overrides,
                              const SweepKeyChecks& checks) {
  return parse_sweep_config(read_file(sweep_file), sweep_file, overrides, checks);
}

}  // namespace hwt::sweep
