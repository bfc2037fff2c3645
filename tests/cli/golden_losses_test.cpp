// Refactors that should not change the math must keep training losses bit-identical under a fixed
// seed. These runs go through the whole binary (config -> plan -> model/data -> trainer -> metrics)
// and compare every step's loss, to the last bit, with losses recorded from commit 094e67e (before
// the Plan/Trainer redesign of issue 20) in tests/cli/golden_losses.json.
//
// The bits depend on the math kernels the machine runs (oneDNN's bf16 GEMMs on AVX512_BF16, MKL's
// fp32 ones), so the file holds one recording per machine (CPU model, AMX and AVX-512, LibTorch
// version: fingerprint() below); on a machine it has none for, the tests are skipped, saying why. To
// record for this machine, or anew on purpose (a change meant to alter the math), run the test
// binary (build/tests/test_cli --gtest_filter='Runs/GoldenLosses.*': one process, the runs one after
// another) with HWTRAIN_RECORD_GOLDEN="<commit and why>" and say so in the commit; HWTRAIN_GOLDEN_BINARY=<path>
// records with another build's binary (e.g. the reference commit's, to add a machine without
// changing what is compared against).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <torch/version.h>

#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>

#include "support/run_metrics.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

const fs::path kGoldenFile = fs::path(HWTRAIN_SOURCE_DIR) / "tests" / "cli" / "golden_losses.json";

struct GoldenRun {
  const char* name;
  int ranks;
  const char* args;  // beyond the common ones
};

// Every run pins what the planner would otherwise measure or detect (precision, threads), so the
// plan, and with it the math, is the same on every machine of a kind.
const char* kTinyCommon =
    "--data corpus --set data.document_separator=% --set model.preset=tiny --set train.eval_interval=0 "
    "--set train.max_steps=30 --set train.micro_batch_size=4 ";

const GoldenRun kRuns[] = {
    // The default model on the default corpus (fortunes), its first 50 steps, bf16 autocast.
    {"default_bf16", 1,
     "--set train.max_steps=50 --set train.eval_interval=0 --set optimization.mixed_precision_dtype=bf16 "
     "--set optimization.intra_op_threads=2"},
    {"fp32", 1, "--set optimization.mixed_precision_dtype=fp32 --set model.dropout=0.1"},
    {"checkpointing_bf16", 1,
     "--set optimization.mixed_precision_dtype=bf16 --set optimization.enable_gradient_checkpointing=true"},
    {"accumulation_fp32", 1,
     "--set optimization.mixed_precision_dtype=fp32 --set train.micro_batch_size=2 --set train.grad_accum_steps=3"},
    {"optimizer_in_backward_bf16", 1,
     "--set optimization.mixed_precision_dtype=bf16 --set optimization.optimizer_in_backward=true "
     "--set train.grad_clip=0"},
    {"fused_head_sdpa_fp32", 1,
     "--set optimization.mixed_precision_dtype=fp32 --set optimization.fused_lm_head_loss=true "
     "--set model.attention=sdpa"},
    {"data_parallel_fp32", 2,
     "--set optimization.mixed_precision_dtype=fp32 --set train.micro_batch_size=2 --set train.grad_accum_steps=2"},
    {"zero1_fp32", 2,
     "--set optimization.mixed_precision_dtype=fp32 --set train.micro_batch_size=2 --set dist.zero1=true"},
};

// The CPU's name, whether it has AMX tiles and AVX-512 (from /proc/cpuinfo).
struct Cpu {
  std::string model = "unknown CPU";
  bool amx = false, avx512 = true;
};

Cpu this_cpu() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  Cpu cpu;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && cpu.model == "unknown CPU") cpu.model = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0) {
      cpu.amx = line.find(" amx_bf16") != std::string::npos;
      cpu.avx512 = line.find(" avx512f") != std::string::npos;
      break;
    }
  }
  return cpu;
}

// The CPU's name and LibTorch's version, " | AMX" where the CPU has AMX tiles (oneDNN's bf16 GEMMs
// then take other kernels) and " | no AVX-512" where it lacks AVX-512 (ATen's and MKL's AVX2
// kernels give other bits in the last place, bf16 GEMMs run in scalar code): cloud CPUs of several
// generations share one name ("Intel(R) Xeon(R) Processor" with and without AMX, "AMD EPYC" with and
// without AVX-512 gave different bits).
std::string fingerprint() {
  const Cpu cpu = this_cpu();
  return cpu.model + " | LibTorch " + TORCH_VERSION + (cpu.amx ? " | AMX" : "") + (cpu.avx512 ? "" : " | no AVX-512");
}

// Without AVX-512, LibTorch multiplies bf16 matrices in scalar code (about 1 GFLOP/s: 30 s a step of
// the default model, 25 minutes for its 50 steps, past the test's limit). The warmup's learning rate
// does not depend on train.max_steps, so there the default run's first kScalarBf16Steps steps are
// compared with the recording's first ones (the second step follows one AdamW update), and the test
// says so; a recording on such a machine holds those steps alone.
constexpr int kScalarBf16Steps = 2;
bool scalar_bf16_gemm() { return !this_cpu().avx512; }

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : "', '") + n;
  return s;
}

using testing::step_losses;

std::vector<double> train(const GoldenRun& run, const fs::path& dir, int port) {
  const bool tiny = std::string(run.name) != "default_bf16";
  std::string args = std::string(tiny ? kTinyCommon : "") + run.args +
                     " --set data.cache_dir=cache --set train.sample_tokens=0 --set train.log_interval=1 "
                     "--set train.time_budget=0 --set log.tensorboard=false --set log.gpu_log_interval=0 "
                     "--set log.report=false --set checkpoint.save_final=false --set train.device=cpu --out " + run.name;
  if (tiny && run.ranks == 1) args += " --set optimization.intra_op_threads=1";
  if (!tiny && scalar_bf16_gemm()) {
    args += " --set train.max_steps=" + std::to_string(kScalarBf16Steps);
    std::cout << "[ NOTE     ] " << run.name << ": the first " << kScalarBf16Steps
              << " steps only (no AVX-512: bf16 GEMMs run in scalar code here)\n";
  }
  const char* other = std::getenv("HWTRAIN_GOLDEN_BINARY");
  std::string cmd = "cd '" + dir.string() + "' && " + (other && *other ? other : HWTRAIN_BINARY) + " ";
  cmd += run.ranks > 1 ? "launch --nproc-per-node " + std::to_string(run.ranks) + " --master-port " +
                             std::to_string(port) + " -- train " + args + " --set optimization.intra_op_threads=1"
                       : "train " + args;
  cmd += " > '" + std::string(run.name) + ".log' 2>&1";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << run.name << ": see " << (dir / (std::string(run.name) + ".log"));
  return step_losses(dir / run.name / "metrics.jsonl");
}

// tests/cli/golden_losses.json as read (an empty list of machines when it is missing).
nlohmann::json read_golden_file() {
  nlohmann::json file = nlohmann::json::object({{"machines", nlohmann::json::array()}});
  if (std::ifstream in{kGoldenFile}) file = nlohmann::json::parse(in);
  return file;
}

// Records `losses` as this machine's run `name`, keeping the other runs and machines. The runs are
// separate tests, each rewriting the file: record them in one process (the test binary, not ctest -j).
void record_golden(const std::string& name, const std::vector<double>& losses, const std::string& note) {
  nlohmann::json file = read_golden_file();
  nlohmann::json machines = nlohmann::json::array(), mine;
  for (const auto& m : file.at("machines")) {
    if (m.at("fingerprint") == fingerprint()) mine = m;
    else machines.push_back(m);
  }
  if (mine.is_null() || mine.at("recorded_from") != note) {
    mine = {{"fingerprint", fingerprint()}, {"recorded_from", note}, {"runs", nlohmann::json::object()}};
  }
  mine["runs"][name] = losses;
  machines.push_back(mine);
  file["machines"] = machines;
  std::ofstream(kGoldenFile) << file.dump(1) << "\n";
}

class GoldenLosses : public ::testing::TestWithParam<size_t> {};

TEST_P(GoldenLosses, BitIdenticalToTheRecordedRun) {
  const GoldenRun& run = kRuns[GetParam()];
  const char* record_note = std::getenv("HWTRAIN_RECORD_GOLDEN");
  nlohmann::json golden;
  std::vector<std::string> recorded_on;
  const nlohmann::json file = read_golden_file();
  for (const auto& m : file.at("machines")) {
    recorded_on.push_back(m.at("fingerprint"));
    if (m.at("fingerprint") == fingerprint()) golden = m;
  }
  if (record_note == nullptr && golden.is_null()) {
    GTEST_SKIP() << "losses were recorded on '" << join_names(recorded_on) << "', this is '" << fingerprint()
                 << "': other math kernels give other bits";
  }
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::vector<double> losses = train(run, dir.path(), 29641 + static_cast<int>(GetParam()));
  if (record_note != nullptr) {
    ASSERT_FALSE(HasFailure() || losses.empty()) << run.name << ": a failed run is not recorded";
    return record_golden(run.name, losses, record_note);
  }
  std::vector<double> want = golden.at("runs").at(run.name).get<std::vector<double>>();
  if (std::string(run.name) == "default_bf16" && scalar_bf16_gemm()) want.resize(kScalarBf16Steps);
  ASSERT_EQ(losses.size(), want.size()) << run.name;
  for (size_t i = 0; i < want.size(); ++i) {
    // Exact equality: the same bits, not merely close (printed with all 17 digits).
    EXPECT_EQ(losses[i], want[i]) << std::setprecision(17) << run.name << " step " << i + 1;
  }
}

// One test a run, so that ctest spreads them over the cores.
INSTANTIATE_TEST_SUITE_P(Runs, GoldenLosses, ::testing::Range<size_t>(0, std::size(kRuns)),
                         [](const ::testing::TestParamInfo<size_t>& info) { return kRuns[info.param].name; });

}  // namespace
}  // namespace hwt
