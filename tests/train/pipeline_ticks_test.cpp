// The interleaved schedule in ticks (train/pipeline_ticks.h): each stage's forwards and backwards
// in interleaved_one_f_one_b's order, and every activation and gradient a stage uses received at an
// earlier tick than it is used, from the neighbour's compute at that tick, in the order used (the
// reason no tick's group waits for a later one), for p = 2..6, v = 2..4 and m = p..4p.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/train/pipeline_step.h"
#include "hwtrain/train/pipeline_ticks.h"

namespace hwt {
namespace {

std::vector<PipeAction> flattened(const std::vector<PipelineTick>& ticks, int64_t p, int64_t v) {
  std::vector<PipeAction> out;
  for (const PipelineTick& t : ticks) {
    if (t.forward >= 0) out.push_back(interleaved_action(PipeOp::Forward, t.forward, p, v));
    if (t.backward >= 0) out.push_back(interleaved_action(PipeOp::Backward, t.backward, p, v));
  }
  return out;
}

// Replays one step's messages: what a stage sends at a tick arrives there (its tick's group) and is
// used at a later tick; fails naming the first message used before it came or out of order.
std::string replay(int64_t p, int64_t v, int64_t m) {
  std::vector<std::vector<PipelineTick>> ticks;
  for (int64_t s = 0; s < p; ++s) ticks.push_back(interleaved_ticks(s, p, v, m));
  const int64_t last = p * v - 1;
  // Per stage: received (micro, virtual stage) per kind, in arrival order.
  std::vector<std::map<int64_t, std::deque<int64_t>>> acts(static_cast<size_t>(p)), grads(acts.size());
  for (size_t tick = 0; tick < ticks[0].size(); ++tick) {
    for (int64_t s = 0; s < p; ++s) {  // compute: each input must have arrived at an earlier tick
      const PipelineTick& t = ticks[static_cast<size_t>(s)].at(tick);
      const std::string at = "stage " + std::to_string(s) + " tick " + std::to_string(tick);
      if (t.forward >= 0) {
        const PipeAction a = interleaved_action(PipeOp::Forward, t.forward, p, v);
        auto& q = acts[static_cast<size_t>(s)][a.chunk * p + s];
        if (a.chunk * p + s != 0 && (q.empty() || q.front() != a.micro)) return at + ": activation not there";
        if (a.chunk * p + s != 0) q.pop_front();
      }
      if (t.backward >= 0) {
        const PipeAction a = interleaved_action(PipeOp::Backward, t.backward, p, v);
        auto& q = grads[static_cast<size_t>(s)][a.chunk * p + s];
        if (a.chunk * p + s != last && (q.empty() || q.front() != a.micro)) return at + ": gradient not there";
        if (a.chunk * p + s != last) q.pop_front();
      }
    }
    for (int64_t s = 0; s < p; ++s) {  // the tick's groups: what was computed, to its consumer
      const PipelineTick& t = ticks[static_cast<size_t>(s)][tick];
      if (t.forward >= 0) {
        const PipeAction a = interleaved_action(PipeOp::Forward, t.forward, p, v);
        const int64_t vs = a.chunk * p + s;
        if (vs != last) acts[static_cast<size_t>((s + 1) % p)][vs + 1].push_back(a.micro);
      }
      if (t.backward >= 0) {
        const PipeAction a = interleaved_action(PipeOp::Backward, t.backward, p, v);
        const int64_t vs = a.chunk * p + s;
        if (vs != 0) grads[static_cast<size_t>((s - 1 + p) % p)][vs - 1].push_back(a.micro);
      }
    }
  }
  for (int64_t s = 0; s < p; ++s) {
    for (const auto& [vs, q] : acts[static_cast<size_t>(s)]) {
      if (!q.empty()) return "stage " + std::to_string(s) + ": an activation never used";
    }
    for (const auto& [vs, q] : grads[static_cast<size_t>(s)]) {
      if (!q.empty()) return "stage " + std::to_string(s) + ": a gradient never used";
    }
  }
  return "";
}

TEST(PipelineTicks, ScheduleOrderAndEveryMessageBeforeItsUse) {
  for (int64_t p = 2; p <= 6; ++p) {
    for (int64_t v = 2; v <= 4; ++v) {
      for (int64_t m = p; m <= 4 * p; m += p) {
        const std::string where = "p " + std::to_string(p) + " v " + std::to_string(v) + " m " + std::to_string(m);
        size_t count = 0;
        for (int64_t s = 0; s < p; ++s) {
          const std::vector<PipelineTick> ticks = interleaved_ticks(s, p, v, m);
          if (s == 0) count = ticks.size();
          EXPECT_EQ(ticks.size(), count) << where;
          EXPECT_EQ(flattened(ticks, p, v), interleaved_one_f_one_b(s, p, v, m)) << where << " stage " << s;
        }
        EXPECT_EQ(replay(p, v, m), "") << where;
      }
    }
  }
}

TEST(PipelineTicks, MicroBatchesNotAMultipleOfTheStagesAreRefused) {
  EXPECT_THROW(interleaved_ticks(0, 3, 2, 4), ConfigError);
}

}  // namespace
}  // namespace hwt
