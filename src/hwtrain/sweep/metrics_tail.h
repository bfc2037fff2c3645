// MetricsTail: follows a running trial's metrics.jsonl, returning at each call the values of one
// metric in the lines completed since the previous call. A partial last line (the trainer is
// mid-write) is kept for the next call; malformed lines are skipped and counted. It understands the
// records hwtrain writes ({"type": "step" | "eval", "step": N, "<metric>": x, ...}; a NaN is
// written as null) and nothing else: monitor records and records without the metric are ignored.
// It does not interpret the values (direction, objective step): see trial_runner.h.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hwt::sweep {

struct MetricPoint {
  std::int64_t step = 0;
  double value = 0.0;  // as written; NaN for null
};

class MetricsTail {
 public:
  MetricsTail(std::filesystem::path path, std::string metric);

  // The metric's values in the lines completed since the last call, in file order. A missing file
  // gives nothing (the trainer has not started writing); a file that became shorter than what was
  // read (rewritten from the start) is read again from its beginning.
  std::vector<MetricPoint> read_new();

  int num_bad_lines() const { return num_bad_lines_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void parse_line(const std::string& line, std::vector<MetricPoint>& out);

  std::filesystem::path path_;
  std::string metric_;
  std::uint64_t offset_ = 0;  // bytes consumed, up to the end of the last complete line
  int num_bad_lines_ = 0;
};

}  // namespace hwt::sweep
