#include "hwtrain/run/run_config.h"

#include <gtest/gtest.h>

#include <sstream>

#include "hwtrain/core/error.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RunConfig, DefaultsValidate) {
  RunConfig c;
  EXPECT_NO_THROW(c.validate());
  EXPECT_TRUE(c.explicit_keys.empty());
}

TEST(RunConfig, TomlFileSetsValuesAndRemembersExplicitKeys) {
  RunConfig c;
  c.apply_toml("[model]\nn_layer = 3\n[train]\nlr = 0.01\nmax_steps = 7\n[optimization]\nmixed_precision_dtype = \"fp32\"\n",
               "run.toml");
  EXPECT_EQ(c.model.n_layer, 3);
  EXPECT_DOUBLE_EQ(c.train.lr, 0.01);
  EXPECT_EQ(c.train.max_steps, 7);
  EXPECT_EQ(c.optimization.mixed_precision_dtype, Precision::Fp32);
  EXPECT_TRUE(c.is_set("train.lr"));
  EXPECT_FALSE(c.is_set("train.seed"));
}

TEST(RunConfig, IntegerAcceptedForFloatKey) {
  RunConfig c;
  c.apply_toml("[train]\nlr = 1\n", "f.toml");
  EXPECT_DOUBLE_EQ(c.train.lr, 1.0);
}

TEST(RunConfig, OverridesParseByFieldType) {
  RunConfig c;
  c.apply_override("model.n_layer=4");
  c.apply_override("train.lr=3e-4");
  c.apply_override("model.bias=false");
  c.apply_override("train.sample_prompt=Hello world");
  EXPECT_EQ(c.model.n_layer, 4);
  EXPECT_DOUBLE_EQ(c.train.lr, 3e-4);
  EXPECT_FALSE(c.model.bias);
  EXPECT_EQ(c.train.sample_prompt, "Hello world");
}

TEST(RunConfig, UnknownKeySuggestsClosest) {
  RunConfig c;
  std::string msg = error_of([&] { c.apply_override("train.max_step=5"); });
  EXPECT_NE(msg.find("unknown key 'train.max_step'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.max_steps"), std::string::npos) << msg;
  msg = error_of([&] { c.apply_toml("[model]\nn_layers = 2\n", "x.toml"); });
  EXPECT_NE(msg.find("x.toml"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.n_layer"), std::string::npos) << msg;
}

TEST(RunConfig, UnknownKeysGetTheSameHintFromTomlAsFromSet) {
  // (TOML document, the same key as --set): one code path, so one message but for the source.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"max_steps = 5\n", "max_steps=5"},                      // outside any table
      {"[train]\nmax_step = 5\n", "train.max_step=5"},
      {"[train.sub]\nx = 1\n", "train.sub=1"},                 // a table where a value belongs
      {"[train]\nlearnin_rate = [1]\n", "train.learnin_rate=1"},  // unknown and not a scalar
      {"[[log]]\nx = 1\n", "log=1"},
  };
  for (const auto& [toml_text, assignment] : cases) {
    RunConfig a, b;
    std::string from_toml = error_of([&] { a.apply_toml(toml_text, "x.toml"); });
    std::string from_set = error_of([&] { b.apply_override(assignment); });
    ASSERT_EQ(from_toml.rfind("x.toml: ", 0), 0u) << from_toml;
    ASSERT_EQ(from_set.rfind("--set: ", 0), 0u) << from_set;
    EXPECT_EQ(from_toml.substr(8), from_set.substr(7)) << toml_text;
  }
  // The hint itself, from a file.
  RunConfig c;
  EXPECT_NE(error_of([&] { c.apply_toml("max_steps = 5\n", "x.toml"); }).find("did you mean 'train.max_steps'"),
            std::string::npos);
  // A known key with a table or list for a value is a type error, without a hint at another key.
  const std::string msg = error_of([&] { c.apply_toml("[train]\nlr = [1]\n", "x.toml"); });
  EXPECT_NE(msg.find("train.lr must be a number, boolean or string, not a list"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

TEST(RunConfig, WrongTypesNameKeyAndExpectedType) {
  RunConfig c;
  std::string msg = error_of([&] { c.apply_override("train.max_steps=abc"); });
  EXPECT_NE(msg.find("train.max_steps"), std::string::npos);
  EXPECT_NE(msg.find("integer"), std::string::npos);
  msg = error_of([&] { c.apply_toml("[train]\nmax_steps = \"ten\"\n", "t.toml"); });
  EXPECT_NE(msg.find("train.max_steps"), std::string::npos);
  msg = error_of([&] { c.apply_override("model.bias=maybe"); });
  EXPECT_NE(msg.find("true or false"), std::string::npos);
  msg = error_of([&] { c.apply_override("noequals"); });
  EXPECT_NE(msg.find("key=value"), std::string::npos);
}

TEST(RunConfig, ChoicesAreChecked) {
  RunConfig c;
  std::string msg = error_of([&] { c.apply_override("optimization.mixed_precision_dtype=bf61"); });
  EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
  EXPECT_FALSE(c.optimization.mixed_precision_dtype.has_value());
}

TEST(RunConfig, SyntaxErrorNamesFileAndLine) {
  RunConfig c;
  std::string msg = error_of([&] { c.apply_toml("[train]\nlr = = 3\n", "bad.toml"); });
  EXPECT_NE(msg.find("bad.toml:2"), std::string::npos) << msg;
}

TEST(RunConfig, OutOfRangeValuesAreRejected) {
  for (const char* o : {"train.micro_batch_size=0", "model.n_layer=-1", "model.dropout=1.5", "train.lr=0",
                        "optimization.memory_threshold=1.2", "checkpoint.keep_last=0", "train.device=tpu"}) {
    RunConfig c;
    c.apply_override(o);
    std::string key = std::string(o).substr(0, std::string(o).find('='));
    std::string msg = error_of([&] { c.validate(); });
    EXPECT_NE(msg.find(key), std::string::npos) << o << " -> " << msg;
  }
  RunConfig c;
  c.apply_override("model.n_embd=100");
  c.apply_override("model.n_head=3");
  std::string msg = error_of([&] { c.validate(); });
  EXPECT_NE(msg.find("not divisible"), std::string::npos) << msg;

  RunConfig gemm;
  gemm.apply_override("model.attention=gemm");
  EXPECT_NO_THROW(gemm.validate());
  gemm.apply_override("model.dropout=0.1");
  msg = error_of([&] { gemm.validate(); });
  EXPECT_NE(msg.find("model.attention = gemm"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.dropout = 0.1"), std::string::npos) << msg;
}

TEST(RunConfig, LossScaleBoundsMustHoldTheInitialScale) {
  auto msg_for = [](std::vector<std::string> overrides) {
    RunConfig c;
    for (const auto& o : overrides) c.apply_override(o);
    return error_of([&] { c.validate(); });
  };
  EXPECT_EQ(msg_for({"optimization.min_loss_scale=1", "optimization.max_loss_scale=65536"}), "");
  std::string msg = msg_for({"optimization.min_loss_scale=1e6"});
  EXPECT_NE(msg.find("optimization.loss_scale_init"), std::string::npos) << msg;
  msg = msg_for({"optimization.min_loss_scale=8", "optimization.max_loss_scale=4", "optimization.loss_scale_init=4"});
  EXPECT_NE(msg.find("optimization.min_loss_scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_loss_scale = 4"), std::string::npos) << msg;
  msg = msg_for({"optimization.max_loss_scale=-1"});
  EXPECT_NE(msg.find("optimization.max_loss_scale"), std::string::npos) << msg;
  // GradScaler's rules, and counts that cannot be negative: each refused by name.
  for (const std::string bad : {"optimization.loss_scale_init=0", "optimization.loss_scale_growth_factor=0.5",
                                "optimization.loss_scale_backoff_factor=3", "optimization.loss_scale_growth_interval=0",
                                "optimization.nonfinite_fallback_steps=-7", "checkpoint.every_minutes=-1"}) {
    msg = msg_for({bad});
    EXPECT_NE(msg.find(bad.substr(0, bad.find('='))), std::string::npos) << bad << ": " << msg;
  }
  // A number that is not finite is refused as such, from --set or a file alike.
  RunConfig c;
  for (const std::string bad : {"train.lr=inf", "train.lr=nan", "train.lr=1e400"}) {
    msg = error_of([&] { c.apply_override(bad); });
    EXPECT_NE(msg.find("is not a finite number"), std::string::npos) << bad << ": " << msg;
  }
  EXPECT_NE(error_of([&] { c.apply_override("train.weight_decay=1e-400"); }).find("too small"), std::string::npos);
  msg = msg_for({"train.warmup_steps=3", "train.decay_steps=3"});  // the decay's end at the warmup's: none
  EXPECT_NE(msg.find("train.decay_steps"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the step at which the decay ends"), std::string::npos) << msg;
  testing::TempDir dir;
  dir.write("inf.toml", "[train]\nlr = inf\n");
  msg = error_of([&] { load_run_config((dir / "inf.toml").string(), {}); });
  EXPECT_NE(msg.find("train.lr = inf is not a finite number"), std::string::npos) << msg;
}

// The seeds' amp_level: named aliases of hwtrain's precision keys, set as if the user set them.
TEST(RunConfig, AmpLevelIsAnAliasOfThePrecisionKeys) {
  RunConfig o2;
  o2.apply_override("optimization.amp_level=O2");
  EXPECT_EQ(o2.optimization.mixed_precision_dtype, Precision::Bf16);
  EXPECT_TRUE(o2.optimization.pure_bf16_weights);
  EXPECT_TRUE(o2.is_set("optimization.mixed_precision_dtype"));
  ASSERT_EQ(o2.alias_notes.size(), 1u);
  EXPECT_NE(o2.alias_notes[0].find("read as optimization.mixed_precision_dtype = bf16"), std::string::npos);
  EXPECT_EQ(o2.to_toml().find("amp_level"), std::string::npos) << "the resolved config shows the keys it set";
  RunConfig o0;
  o0.apply_toml("[optimization]\namp_level = \"O0\"\n", "run.toml");
  EXPECT_EQ(o0.optimization.mixed_precision_dtype, Precision::Fp32);
  RunConfig o1;
  o1.apply_override("optimization.amp_level=O1");
  EXPECT_FALSE(o1.optimization.mixed_precision_dtype.has_value());
  RunConfig o3;
  o3.apply_override("optimization.amp_level=O3");
  EXPECT_EQ(o3.optimization.mixed_precision_dtype, Precision::Bf16);
  EXPECT_TRUE(o3.optimization.pure_bf16_weights);
  EXPECT_EQ(o3.optimization.optimizer_state_dtype, StateDtype::Int8);
  ASSERT_EQ(o3.alias_notes.size(), 2u);
  EXPECT_NE(o3.alias_notes[1].find("an update smaller than bf16's spacing"), std::string::npos) << o3.alias_notes[1];
  std::string msg = error_of([&] { RunConfig c; c.apply_override("optimization.amp_level=O4"); });
  EXPECT_NE(msg.find("optimization.amp_level = 'O4' is not valid"), std::string::npos) << msg;
}

TEST(RunConfig, OptimizerInBackwardRefusesWhatNeedsEveryGradientFirst) {
  RunConfig c;
  c.apply_override("optimization.optimizer_in_backward=true");
  std::string msg = error_of([&] { c.validate(); });  // the default train.grad_clip = 1
  EXPECT_NE(msg.find("optimization.optimizer_in_backward"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.grad_clip = 1"), std::string::npos) << msg;
  c.apply_override("train.grad_clip=0");
  EXPECT_NO_THROW(c.validate());
  const char* conflicts[][2] = {{"train.grad_accum_steps=2", "train.grad_accum_steps = 2"},
                                {"optimization.auto_batch_size=true", "optimization.auto_batch_size"},
                                {"optimization.mixed_precision_dtype=fp16", "fp16"}};
  for (const auto& [assignment, named] : conflicts) {
    RunConfig d = c;
    d.apply_override(assignment);
    msg = error_of([&] { d.validate(); });
    EXPECT_NE(msg.find(named), std::string::npos) << assignment << ": " << msg;
  }
}

TEST(RunConfig, PresetAppliesFirstAndExplicitKeysWin) {
  RunConfig c;
  // The preset comes after n_layer in the file but is applied first.
  c.apply_toml("[model]\nn_layer = 2\npreset = \"gpt2\"\n", "p.toml");
  EXPECT_EQ(c.model.n_layer, 2);
  EXPECT_EQ(c.model.n_embd, 768);
  EXPECT_EQ(c.model.block_size, 1024);
  std::string msg = error_of([&] { c.apply_override("model.preset=gpt3"); });
  EXPECT_NE(msg.find("gpt2"), std::string::npos) << msg;
}

TEST(RunConfig, LlamaPresetSetsTheArchitectureAndExplicitKeysWin) {
  RunConfig c;
  c.apply_toml("[model]\npreset = \"llama-3.1-8b\"\nn_kv_head = 4\nblock_size = 512\n", "l.toml");
  EXPECT_EQ(c.model.architecture, Architecture::kLlama);
  EXPECT_EQ(c.model.n_layer, 32);
  EXPECT_EQ(c.model.n_kv_head, 4);  // explicit
  EXPECT_EQ(c.model.block_size, 512);
  EXPECT_EQ(c.model.intermediate_size, 14336);
  EXPECT_EQ(c.model.vocab_size, 128256);
  EXPECT_EQ(c.model.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(c.model.rope_theta, 500000.0);
  EXPECT_FALSE(c.model.tie_word_embeddings);
  c.validate();
  RunConfig g;
  g.apply_override("model.preset=gpt2");
  EXPECT_EQ(g.model.architecture, Architecture::kGpt2);
  std::string msg = error_of([&] { g.apply_override("model.rope_scaling=yarn"); });
  EXPECT_NE(msg.find("model.rope_scaling"), std::string::npos) << msg;
}

TEST(RunConfig, TomlRoundTrip) {
  RunConfig a;
  a.apply_override("model.n_layer=5");
  a.apply_override("train.sample_prompt=say \"hi\"\n");
  a.apply_override("optimization.memory_threshold=0.5");
  RunConfig b;
  b.apply_toml(a.to_toml(), "saved.toml");
  EXPECT_EQ(a.to_toml(), b.to_toml());
  EXPECT_EQ(b.model.n_layer, 5);
  EXPECT_EQ(b.train.sample_prompt, "say \"hi\"\n");
  EXPECT_NE(a.to_json().find("\"n_layer\": 5"), std::string::npos);
}

// --help-config: every key once, with its description (and choices) on the line above it; the
// text is a config file that reads back as the defaults.
TEST(RunConfig, DocumentedTomlDescribesEveryKeyAndReadsBack) {
  RunConfig defaults;
  defaults.apply_override("model.n_layer=6");
  const std::string text = defaults.to_documented_toml();
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string table;
  size_t described = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.size() > 2 && l.front() == '[') table = l.substr(1, l.size() - 2);
    const size_t eq = l.find(" = ");
    if (l.empty() || l[0] == '#' || l[0] == '[' || eq == std::string::npos) continue;
    ASSERT_GT(i, 0u);
    EXPECT_EQ(lines[i - 1].rfind("# ", 0), 0u) << table << "." << l.substr(0, eq) << " has no description";
    EXPECT_GT(lines[i - 1].size(), 6u) << l;
    ++described;
  }
  EXPECT_EQ(described, RunConfig::all_keys().size());
  EXPECT_NE(text.find("# how training draws windows"), std::string::npos);
  EXPECT_NE(text.find("(one of: auto, bf16, fp16, fp32)\nmixed_precision_dtype = \"auto\""), std::string::npos);
  RunConfig back;
  back.apply_toml(text, "help-config.toml");
  EXPECT_EQ(back.to_toml(), defaults.to_toml());
}

TEST(RunConfig, LoadRunConfigReportsUnreadableFile) {
  testing::TempDir dir;
  std::string msg = error_of([&] { load_run_config((dir / "missing.toml").string(), {}); });
  EXPECT_NE(msg.find("missing.toml"), std::string::npos) << msg;
  auto f = dir.write("ok.toml", "[train]\nmax_steps = 9\n");
  RunConfig c = load_run_config(f.string(), {"train.max_steps=11"});
  EXPECT_EQ(c.train.max_steps, 11);  // command line wins over the file
}

}  // namespace
}  // namespace hwt

namespace hwt {
namespace {

// One choice, one key: the two switches of earlier versions still run, read as today's key.
TEST(RunConfig, DeprecatedSwitchesAreReadAsTheOneKeyOfTheirChoice) {
  RunConfig off;
  off.apply_override("optimization.enable_mixed_precision=false");
  EXPECT_EQ(off.optimization.mixed_precision_dtype, Precision::Fp32);
  EXPECT_TRUE(off.is_set("optimization.mixed_precision_dtype"));
  ASSERT_EQ(off.deprecations.size(), 1u);
  EXPECT_NE(off.deprecations[0].find("optimization.enable_mixed_precision is deprecated"), std::string::npos);
  RunConfig on;
  on.apply_override("optimization.enable_mixed_precision=true");
  EXPECT_FALSE(on.optimization.mixed_precision_dtype.has_value());

  RunConfig every;
  every.apply_override("optimization.enable_gradient_checkpointing=true");
  EXPECT_EQ(every.optimization.checkpoint_every, 1);
  every.apply_override("optimization.checkpoint_every=2");
  EXPECT_EQ(every.optimization.checkpoint_every, 2);
  every.apply_override("optimization.enable_gradient_checkpointing=true");  // keeps the k given
  EXPECT_EQ(every.optimization.checkpoint_every, 2);
  every.apply_override("optimization.enable_gradient_checkpointing=false");
  EXPECT_EQ(every.optimization.checkpoint_every, 0);
  EXPECT_THROW(every.apply_override("optimization.enable_gradient_checkpointing=maybe"), ConfigError);

  // An older run's config.toml (both switches of both choices) still loads and means the same.
  RunConfig old;
  old.apply_toml("[optimization]\nenable_mixed_precision = true\nmixed_precision_dtype = \"bf16\"\n"
                 "enable_gradient_checkpointing = false\ncheckpoint_every = 1\n",
                 "old/config.toml");
  EXPECT_EQ(old.optimization.mixed_precision_dtype, Precision::Bf16);
  EXPECT_EQ(old.optimization.checkpoint_every, 0);
  EXPECT_NO_THROW(old.validate());
  const std::string written = old.to_toml();
  EXPECT_EQ(written.find("enable_mixed_precision"), std::string::npos);
  EXPECT_EQ(written.find("enable_gradient_checkpointing"), std::string::npos);
  EXPECT_NE(written.find("checkpoint_every = 0"), std::string::npos);
}

TEST(RunConfig, CheckpointEveryIsMinusOneForThePlannerZeroForOffOrK) {
  RunConfig c;
  EXPECT_EQ(c.optimization.checkpoint_every, -1);
  c.apply_override("optimization.checkpoint_every=-2");
  EXPECT_NE(error_of([&] { c.validate(); }).find("optimization.checkpoint_every = -2"), std::string::npos);
}

}  // namespace
}  // namespace hwt

namespace hwt {
namespace {

// Each options struct checks its own fields, next to them; RunConfig::validate adds only the
// checks that span tables.
TEST(OptionsStructs, EachValidatesItsOwnFields) {
  ModelConfig model;
  model.n_head = 3;
  EXPECT_NE(error_of([&] { model.validate(); }).find("model.n_embd = 256 is not divisible by model.n_head = 3"),
            std::string::npos);
  TrainConfig train;
  train.device = "cuda:x";
  EXPECT_NE(error_of([&] { train.validate(); }).find("train.device = 'cuda:x'"), std::string::npos);
  train.device = "cuda:12";
  EXPECT_NO_THROW(train.validate());
  ObsConfig log;
  for (const char* bad : {"5", "9:3", "a:b", ":2", "1:"}) {
    log.profile_steps = bad;
    EXPECT_NE(error_of([&] { log.validate(); }).find("log.profile_steps"), std::string::npos) << bad;
  }
  log.profile_steps = "3:9";
  EXPECT_NO_THROW(log.validate());
  DataConfig data;
  data.val_fraction = 0.7;
  EXPECT_NE(error_of([&] { data.validate(); }).find("must be in (0, 0.5]"), std::string::npos);
  OptimizationConfig opt;
  opt.memory_threshold = 0;
  EXPECT_THROW(opt.validate(), ConfigError);
  DistConfig dist;
  dist.timeout = 1e10;  // was accepted, then overflowed the rendezvous store's timeout
  EXPECT_NE(error_of([&] { dist.validate(); }).find("must be > 0 and at most 2592000 seconds"), std::string::npos);
  CheckpointConfig ckpt;
  ckpt.keep_last = 0;
  EXPECT_THROW(ckpt.validate(), ConfigError);
}

}  // namespace
}  // namespace hwt
