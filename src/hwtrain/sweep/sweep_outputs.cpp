#include "hwtrain/sweep/sweep_outputs.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <toml++/toml.h>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/sweep/search_space.h"
#include "hwtrain/sweep/toml_text.h"
#include "hwtrain/sweep/trial_codec.h"

namespace hwt::sweep {
namespace {

// Complete < pruned < the rest; within the first two, lower values first (none last).
bool trial_ranks_before(const Trial& a, const Trial& b) {
  const auto group = [](const Trial& t) {
    return t.state == TrialState::kComplete ? 0 : t.state == TrialState::kPruned ? 1 : 2;
  };
  if (group(a) != group(b)) return group(a) < group(b);
  if (group(a) < 2) {
    const bool av = a.value && !std::isnan(*a.value), bv = b.value && !std::isnan(*b.value);
    if (av != bv) return av;
    if (av && *a.value != *b.value) return *a.value < *b.value;
  }
  return a.number < b.number;
}

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// Sets t[leaf] to the TOML value a choice literal reads as: a boolean, integer or real when it
// parses as one ("true", "4", "0.1"), else the literal as a string ("bf16").
void assign_literal(toml::table& t, const std::string& leaf, const std::string& literal) {
  try {
    toml::table parsed = toml::parse("v = " + literal);
    const toml::node* v = parsed.get("v");
    if (parsed.size() == 1 && v && (v->is_boolean() || v->is_integer() || v->is_floating_point())) {
      t.insert_or_assign(leaf, *v);
      return;
    }
  } catch (const toml::parse_error&) {
  }
  t.insert_or_assign(leaf, literal);
}

void set_dotted(toml::table& root, const std::string& key, const ParamValue& value, const std::string& source,
                const IsTextValue& is_text) {
  toml::table* t = &root;
  std::size_t start = 0;
  for (std::size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', start)) {
    const std::string part = key.substr(start, dot - start);
    if (!t->contains(part)) t->insert(part, toml::table{});
    toml::table* next = t->get(part)->as_table();
    if (!next) throw ConfigError(source + ": " + key.substr(0, dot) + " is a value, but the best trial sets " + key + " inside it");
    t = next;
    start = dot + 1;
  }
  const std::string leaf = key.substr(start);
  if (const auto* d = std::get_if<double>(&value)) {
    t->insert_or_assign(leaf, *d);
  } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
    t->insert_or_assign(leaf, *i);
  } else if (const std::string& literal = std::get<std::string>(value); is_text && is_text(key, literal)) {
    t->insert_or_assign(leaf, literal);
  } else {
    assign_literal(*t, leaf, literal);
  }
}

}  // namespace

std::string format_trials_table(const std::vector<Trial>& trials, const std::string& objective, Direction direction,
                                const std::map<std::int64_t, double>& seconds) {
  std::vector<const Trial*> order;
  for (const Trial& t : trials) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const Trial* a, const Trial* b) { return trial_ranks_before(*a, *b); });
  std::vector<std::vector<std::string>> rows = {{"trial", "state", objective, "seconds", "params", "reason"}};
  for (const Trial* t : order) {
    std::vector<std::string> params;
    for (const auto& [k, v] : t->params) params.push_back(k + "=" + to_override_value(v));
    auto s = seconds.find(t->number);
    std::optional<double> wall;
    if (s != seconds.end()) {
      wall = s->second;
    } else if (t->finished_unix && t->started_unix > 0) {
      wall = *t->finished_unix - t->started_unix;  // a trial of an earlier run: the store's clock
    }
    std::string value = "-";
    if (t->value) value = format_number("%.6g", direction == Direction::kMax ? -*t->value : *t->value);
    rows.push_back({std::to_string(t->number), trial_state_name(t->state), value,
                    !wall ? "-" : format_number("%.0f", *wall), join(params, " "), t->reason});
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (std::size_t c = 0; c + 1 < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::ostringstream out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) line += (c ? "  " : "") + (c + 1 < r.size() ? pad(r[c], width[c]) : r[c]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
  return out.str();
}

std::string best_config_toml(const std::string& base_toml, const std::string& base_source, const Params& params,
                             const std::string& header, const IsTextValue& is_text) {
  toml::table doc = parse_toml_text(base_toml, base_source);
  for (const auto& [key, value] : params) set_dotted(doc, key, value, base_source, is_text);
  std::ostringstream out;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) out << "# " << line << "\n";
  out << toml::toml_formatter(doc, toml::format_flags::none) << "\n";
  return out.str();
}

void write_best_config(const std::filesystem::path& out, const std::filesystem::path& base_config, const Params& params,
                       const std::string& header, const IsTextValue& is_text) {
  const std::string base = base_config.empty() ? std::string() : read_file(base_config);
  const std::string source = base_config.empty() ? std::string("best config") : base_config.string();
  write_file_atomic(out, best_config_toml(base, source, params, header, is_text));
}

}  // namespace hwt::sweep
