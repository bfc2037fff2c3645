// The built-in callbacks a run's config asks for, built and validated in one place, in the order
// they must run: interrupt (Ctrl-C), early stopping, LR on plateau, LR monitor (after the plateau,
// so it sees the change in the same step), profiler. Metric sinks, checkpointing and the time
// budget are added by the train command itself.
#pragma once
#include <memory>
#include <vector>

#include "hwtrain/run/run_config.h"
#include "hwtrain/train/callback.h"

namespace hwt {

// ConfigError for an unknown `monitor` metric (listing the available ones), a bad range, or a
// monitored evaluation metric in a run without evaluations (train.eval_interval = 0).
// `rank` names the profiler's files on ranks other than 0. In a run of `world_size` > 1 processes
// a monitor must be a metric every rank shares (obs/metrics.h's is_rank_local_metric).
std::vector<std::shared_ptr<Callback>> make_configured_callbacks(const RunConfig& config, int rank = 0,
                                                                 int world_size = 1);

// Checks that `metric` (the value of config key `key`) names a metric this run produces, and one the
// processes of a run of `world_size` agree on.
void check_monitor(const RunConfig& config, const std::string& key, const std::string& metric, int world_size = 1);

}  // namespace hwt
