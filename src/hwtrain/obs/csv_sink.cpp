#include "hwtrain/obs/csv_sink.h"

#include <charconv>
#include <cmath>

namespace hwt {

namespace {
template <class Record>
std::string header(const std::vector<MetricField<Record>>& fields) {
  std::string line;
  for (const auto& f : fields) {
    if (!line.empty()) line += ',';
    line += f.name;
  }
  return line + "\n";
}

template <class Record>
std::string row(const std::vector<MetricField<Record>>& fields, const Record& r) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line += ',';
    line += csv_number(fields[i].get(r));
  }
  return line + "\n";
}
}  // namespace

std::string csv_number(std::optional<double> v) {
  if (!v || std::isinf(*v)) return v ? (*v > 0 ? "inf" : "-inf") : "";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), *v);
  return std::string(buf, res.ptr);
}

CsvSink::CsvSink(const std::filesystem::path& run_dir, bool append)
    : steps_(run_dir / kStepFileName, append), evals_(run_dir / kEvalFileName, append) {
  if (steps_.initial_size() == 0) steps_.write(header(step_fields()));
  if (evals_.initial_size() == 0) evals_.write(header(eval_fields()));
}

void CsvSink::on_step(const StepMetrics& m) { steps_.write(row(step_fields(), m)); }
void CsvSink::on_eval(const EvalMetrics& m) { evals_.write(row(eval_fields(), m)); }

void CsvSink::flush() {
  steps_.flush();
  evals_.flush();
}

}  // namespace hwt
