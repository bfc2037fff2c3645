// dist.tensor_parallel / dist.pipeline_parallel = "auto": a run's mesh is the planner's layout search's
// choice (plan/layout_decision.cpp), on GPUs and on CPU processes. The config key reads and writes
// "auto"; a model that fits keeps data parallelism; one that does not fit a process is split; the
// search offers a run only what it can execute (no ZeRO-3 with a pipeline); settings that need the
// whole model keep data parallelism and say why; CPU ranks plan with their share of the memory.
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/plan/memory_model.h"
#include "hwtrain/plan/parallel_layout.h"
#include "hwtrain/run/run_bindings.h"
#include "run/planner_machines.h"

namespace hwt {
namespace auto_layout {

using planner_machines::cpu_box;
using planner_machines::decision;

RunConfig auto_config(const std::vector<std::string>& more = {}) {
  RunConfig c;
  c.apply_override("model.preset=tiny");
  c.apply_override("model.n_layer=4");
  c.apply_override("model.n_embd=256");
  c.apply_override("model.n_head=4");
  c.apply_override("model.block_size=128");
  c.model.vocab_size = 320;
  c.apply_override("optimization.mixed_precision_dtype=fp32");
  c.apply_override("dist.tensor_parallel=auto");
  c.apply_override("dist.pipeline_parallel=auto");
  for (const auto& o : more) c.apply_override(o);
  return c;
}

PlanContext two_ranks() {
  PlanContext ctx;
  ctx.world_size = 2;
  ctx.ranks_per_node = 2;
  return ctx;
}

// The least the whole model needs on a rank without sharding: micro-batch 1, every block recomputed.
double whole_model_least(const RunConfig& c) {
  MemoryQuery q;
  q.model = c.model;
  q.world_size = 2;
  q.checkpoint_every = 1;
  return estimate_memory(q).total();
}

TEST(AutoLayout, ConfigReadsAndWritesAuto) {
  RunConfig c;
  EXPECT_EQ(c.dist.tensor_parallel.value_or(-1), 1);  // the default: no tensor parallelism unless asked
  c.apply_override("dist.tensor_parallel=auto");
  EXPECT_FALSE(c.dist.tensor_parallel);
  EXPECT_NE(c.to_toml().find("tensor_parallel = \"auto\""), std::string::npos) << c.to_toml();
  RunConfig back;
  back.apply_toml(c.to_toml(), "config.toml");
  EXPECT_FALSE(back.dist.tensor_parallel);
  back.apply_toml("[dist]\npipeline_parallel = 2\n", "config.toml");
  EXPECT_EQ(back.dist.pipeline_parallel.value_or(-1), 2);
  try {
    back.apply_override("dist.pipeline_parallel=two");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dist.pipeline_parallel = 'two' has the wrong type: expected an integer or "
                                         "\"auto\""),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(back.apply_toml("[dist]\ntensor_parallel = \"four\"\n", "x.toml"), ConfigError);
  back.apply_override("dist.tensor_parallel=0");
  EXPECT_THROW(back.validate(), ConfigError);
}

TEST(AutoLayout, AModelThatFitsKeepsDataParallelAndSaysWhy) {
  const Plan p = make_plan(cpu_box(20ll << 30), auto_config(), two_ranks());
  ASSERT_TRUE(p.layout);
  EXPECT_EQ(p.layout->name(), "tp1 x pp1 x dp2");
  const Decision& d = decision(p, "parallel_layout");
  EXPECT_NE(d.reason.find("fastest that fits"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("2 CPU processes"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("Gloo over the loopback"), std::string::npos) << d.reason;
  EXPECT_EQ(p.world_size, 2);
  EXPECT_FALSE(p.layouts_considered.empty());
  EXPECT_NE(d.reason.find("tp in {1, 2}"), std::string::npos) << d.reason;
  // Sequence parallelism (the default) cuts the sequence over the tensor ranks: 127 positions, not by 2.
  const Plan odd = make_plan(cpu_box(20ll << 30), auto_config({"model.block_size=127"}), two_ranks());
  EXPECT_NE(decision(odd, "parallel_layout").reason.find("tp in {1}"), std::string::npos)
      << decision(odd, "parallel_layout").reason;
}

// A budget under the whole model's least but over half of it: the search splits the model (the
// sharding pinned to none, so that ZeRO-3 over two replicas is not the way out) and the plan takes
// the layout's batch arithmetic: one replica.
TEST(AutoLayout, AModelThatDoesNotFitAProcessIsSplit) {
  RunConfig c = auto_config({"dist.sharding=none"});
  const double least = whole_model_least(c);
  // Two local processes share the memory: each plans with 0.75 x available / 2 = 0.75 x least.
  const Plan p = make_plan(cpu_box(static_cast<int64_t>(2 * least)), c, two_ranks());
  ASSERT_TRUE(p.layout);
  EXPECT_EQ(p.layout->tensor_parallel * p.layout->pipeline_parallel, 2) << p.layout->summary();
  EXPECT_EQ(p.layout->data_parallel, 1);
  EXPECT_EQ(p.world_size, 1);
  EXPECT_LE(p.layout->predicted_peak_bytes, p.memory_budget_bytes);
  EXPECT_NEAR(p.memory_budget_bytes, 0.75 * least, 1e-6 * least);
  bool whole_refused = false;
  for (const LayoutOption& o : p.layouts_considered) {
    if (o.layout.name() == "tp1 x pp1 x dp2") whole_refused = !o.fits && o.verdict.find("does not fit") == 0;
  }
  EXPECT_TRUE(whole_refused);

  EXPECT_NE(decision(make_plan(cpu_box(20ll << 30), c, two_ranks()), "memory").reason.find("75% of 20.0 GiB / 2 local ranks"),
            std::string::npos);
  // The same machine for one process: the whole budget, and the whole model fits it.
  PlanContext one;
  one.ranks_per_node = 1;
  one.world_size = 2;
  EXPECT_NEAR(make_plan(cpu_box(static_cast<int64_t>(2 * least)), c, one).memory_budget_bytes, 1.5 * least,
              1e-6 * least);
}

// A node's ranks bound a tensor group, not its GPUs: 4 processes per 8-GPU node cannot keep 8
// tensor ranks together (each group would span two nodes, costed as NVLink).
TEST(AutoLayout, ATensorGroupStaysWithinANodesRanks) {
  HardwareProfile hw = planner_machines::gpu_machine(9);
  for (int i = 1; i < 8; ++i) hw.gpus.push_back(hw.gpus[0]);
  const RunConfig c = auto_config({"dist.tensor_parallel=8", "model.n_head=8"});
  PlanContext ctx;
  ctx.world_size = 16;
  ctx.ranks_per_node = 8;
  EXPECT_NO_THROW(make_plan(hw, c, ctx));
  ctx.ranks_per_node = 4;
  try {
    make_plan(hw, c, ctx);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dist.tensor_parallel = 8 does not fit in one node's 4 GPU ranks"),
              std::string::npos) << e.what();
  }
}

// A pinned sharding is weighed with every layout that has replicas to shard over: zero3 and zero2
// of a pipeline's stages run like any other (a pipeline of one replica cannot shard, and says so).
TEST(AutoLayout, APinnedShardingIsWeighedWithPipelines) {
  const double least = whole_model_least(auto_config({"dist.sharding=zero3"}));
  PlanContext four = two_ranks();
  four.world_size = four.ranks_per_node = 4;
  for (const Sharding s : {Sharding::Zero3, Sharding::Zero2}) {
    const std::string key = std::string("dist.sharding=") + sharding_name(s);
    const Plan p = make_plan(cpu_box(static_cast<int64_t>(4 * least)), auto_config({key}), four);
    int pipelines = 0;
    for (const LayoutOption& o : p.layouts_considered) {
      if (o.layout.pipeline_parallel == 1) continue;
      if (o.layout.data_parallel == 1) {
        EXPECT_FALSE(o.fits) << o.layout.summary();
        EXPECT_NE(o.verdict.find("needs data-parallel ranks"), std::string::npos) << o.verdict;
        continue;
      }
      ++pipelines;
      EXPECT_EQ(o.layout.sharding, s) << o.layout.summary();
      EXPECT_TRUE(o.fits) << o.layout.summary() << ": " << o.verdict;
    }
    EXPECT_GT(pipelines, 0) << key;
  }
}

// Settings that need the whole model on every rank keep data parallelism, and the plan says so.
TEST(AutoLayout, WholeModelSettingsKeepDataParallelAndSaySo) {
  const Plan p = make_plan(cpu_box(20ll << 30), auto_config({"optimization.auto_batch_size=true"}), two_ranks());
  EXPECT_FALSE(p.layout);
  const Decision& d = decision(p, "parallel_layout");
  EXPECT_EQ(d.value, "tp1 x pp1 x dp2");
  EXPECT_NE(d.reason.find("optimization.auto_batch_size needs the whole model"), std::string::npos) << d.reason;
  const Plan one = make_plan(cpu_box(20ll << 30), auto_config());
  EXPECT_NE(decision(one, "parallel_layout").reason.find("one rank"), std::string::npos);
}

// A size the user fixed is kept: tensor parallel auto with pipeline parallel 1 searches tensor sizes only.
TEST(AutoLayout, AFixedSizeIsKept) {
  RunConfig c = auto_config({"dist.pipeline_parallel=1"});
  const Plan p = make_plan(cpu_box(20ll << 30), c, two_ranks());
  for (const LayoutOption& o : p.layouts_considered) EXPECT_EQ(o.layout.pipeline_parallel, 1) << o.layout.summary();
  EXPECT_NE(decision(p, "parallel_layout").reason.find("dist.pipeline_parallel = 1"), std::string::npos);
  // Without "auto" a run's plan searches nothing: its mesh is the configured one.
  RunConfig fixed = auto_config({"dist.tensor_parallel=1", "dist.pipeline_parallel=1"});
  EXPECT_FALSE(make_plan(cpu_box(20ll << 30), fixed, two_ranks()).layout);
}

}  // namespace auto_layout
}  // namespace hwt
