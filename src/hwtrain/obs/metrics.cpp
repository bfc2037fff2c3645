#include "hwtrain/obs/metrics.h"

#include <algorithm>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"

namespace hwt {

namespace {
using S = StepMetrics;
using E = EvalMetrics;

MetricField<S> sreal(const char* name, const char* group, double S::*p) {
  return {name, group, p, nullptr};
}
MetricField<S> sint(const char* name, const char* group, int64_t S::*p) {
  return {name, group, nullptr, p};
}

// Names that identify a record rather than measure the run; not monitorable.
bool is_index_field(const std::string& name) {
  return name == "step" || name == "elapsed_seconds";
}
}  // namespace

const std::vector<MetricField<StepMetrics>>& step_fields() {
  static const std::vector<MetricField<S>> fields = {
      sint("step", "train", &S::step),
      sreal("loss", "train", &S::loss),
      sreal("lr", "train", &S::lr),
      sreal("grad_norm", "train", &S::grad_norm),
      sreal("tokens_per_second", "perf", &S::tokens_per_second),
      sreal("mfu", "perf", &S::mfu),
      sreal("step_seconds", "time", &S::step_seconds),
      sreal("data_wait_seconds", "time", &S::data_wait_seconds),
      sreal("forward_seconds", "time", &S::forward_seconds),
      sreal("backward_seconds", "time", &S::backward_seconds),
      sreal("optimizer_seconds", "time", &S::optimizer_seconds),
      sreal("comm_seconds", "time", &S::comm_seconds),
      sreal("rss_bytes", "memory", &S::rss_bytes),
      sreal("device_allocated_bytes", "memory", &S::device_allocated_bytes),
      sreal("device_reserved_bytes", "memory", &S::device_reserved_bytes),
      sreal("device_peak_bytes", "memory", &S::device_peak_bytes),
      sreal("loss_scale", "train", &S::loss_scale),
      sint("skipped_steps", "train", &S::skipped_steps),
      sint("tokens_seen", "train", &S::tokens_seen),
      sreal("elapsed_seconds", "time", &S::elapsed_seconds),
  };
  return fields;
}

const std::vector<MetricField<EvalMetrics>>& eval_fields() {
  static const std::vector<MetricField<E>> fields = {
      {"step", "eval", nullptr, &E::step},
      {"val_loss", "eval", &E::val_loss, nullptr},
      {"val_perplexity", "eval", &E::val_perplexity, nullptr},
      {"elapsed_seconds", "eval", &E::elapsed_seconds, nullptr},
  };
  return fields;
}

std::vector<std::string> available_metric_names() {
  std::vector<std::string> names;
  for (const auto& f : step_fields()) {
    if (!is_index_field(f.name)) names.push_back(f.name);
  }
  for (const auto& f : eval_fields()) {
    if (!is_index_field(f.name)) names.push_back(f.name);
  }
  return names;
}

bool is_eval_metric(const std::string& name) {
  return std::any_of(eval_fields().begin(), eval_fields().end(),
                     [&](const auto& f) { return !is_index_field(f.name) && name == f.name; });
}

bool is_rank_local_metric(const std::string& name) {
  return std::any_of(step_fields().begin(), step_fields().end(), [&](const auto& f) {
    const std::string group = f.group;
    return name == f.name && (group == "perf" || group == "time" || group == "memory");
  });
}

void check_metric_name(const std::string& name, const std::string& key) {
  auto names = available_metric_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  throw ConfigError(key + ": unknown metric '" + name + "'" + did_you_mean(name, names) +
                    "; available: " + join(names));
}

namespace {
template <class Record>
std::optional<double> lookup(const std::vector<MetricField<Record>>& fields,
                             const std::string& name, const Record& r) {
  if (!is_index_field(name)) {
    for (const auto& f : fields) {
      if (name == f.name) return f.get(r);
    }
  }
  check_metric_name(name, "monitor");  // throws for names that are no metric at all
  return std::nullopt;                 // a metric of the other record kind
}
}  // namespace

std::optional<double> metric_value(const std::string& name, const StepMetrics& m) {
  return lookup(step_fields(), name, m);
}

std::optional<double> metric_value(const std::string& name, const EvalMetrics& m) {
  return lookup(eval_fields(), name, m);
}

}  // namespace hwt
