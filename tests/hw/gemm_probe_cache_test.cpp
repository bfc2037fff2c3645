// The GEMM probe cache: a recent probe of the same machine is read back, anything else (another
// key, too old, a damaged file) probes again; detect_hardware reads it and the doctor does not.
#include <gtest/gtest.h>
#include <ATen/Parallel.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "hwtrain/core/files.h"
#include "hwtrain/hw/gemm_probe_cache.h"
#include "hwtrain/hw/hardware_profile.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

CachedGemmProbe probe_of(double fp32, double bf16) {
  CachedGemmProbe c;
  c.rates.n = 512;
  c.rates.threads = 2;
  c.rates.fp32_gflops = fp32;
  c.rates.bf16_gflops = bf16;
  c.load_average = 0.5;
  return c;
}

TEST(GemmProbeCache, ARecentProbeOfTheSameKeyIsReadBack) {
  testing::TempDir dir;
  const auto file = dir / "gemm-probe.json";
  EXPECT_FALSE(read_gemm_probe(file, "k", 1000, 3600));  // no file
  write_gemm_probe(file, "k", probe_of(90.5, 1.4), 1000);
  const auto got = read_gemm_probe(file, "k", 1060, 3600);
  ASSERT_TRUE(got);
  EXPECT_DOUBLE_EQ(got->rates.fp32_gflops, 90.5);
  EXPECT_DOUBLE_EQ(got->rates.bf16_gflops, 1.4);
  EXPECT_EQ(got->rates.n, 512);
  EXPECT_EQ(got->rates.threads, 2);
  EXPECT_DOUBLE_EQ(got->load_average, 0.5);
  EXPECT_DOUBLE_EQ(got->age_seconds, 60);
  EXPECT_FALSE(read_gemm_probe(file, "other machine", 1060, 3600));
  EXPECT_FALSE(read_gemm_probe(file, "k", 1000 + 3601, 3600));  // too old
  EXPECT_FALSE(read_gemm_probe(file, "k", 1060, 0));             // 0: always measure
  EXPECT_FALSE(read_gemm_probe(file, "k", 999, 3600));           // measured "in the future": a clock moved back
}

TEST(GemmProbeCache, ADamagedFileIsIgnoredAndReplaced) {
  testing::TempDir dir;
  const auto file = dir / "gemm-probe.json";
  for (const char* text : {"not json", "[]", R"({"format_version": 2, "entries": {}})",
                           R"({"format_version": 1, "entries": {"k": {"measured_at": 1000, "n": 512, "threads": 2,
                               "fp32_gflops": "fast", "bf16_gflops": 1, "load_average": 0}}})",
                           R"({"format_version": 1, "entries": {"k": {"measured_at": 1000, "n": 512, "threads": 2,
                               "fp32_gflops": -5, "bf16_gflops": 1, "load_average": 0}}})"}) {
    write_file_atomic(file, text);
    EXPECT_FALSE(read_gemm_probe(file, "k", 1010, 3600)) << text;
  }
  write_file_atomic(file, std::string(128 << 10, ' '));  // over the size bound
  EXPECT_FALSE(read_gemm_probe(file, "k", 1010, 3600));
  write_gemm_probe(file, "k", probe_of(50, 0), 1000);
  EXPECT_TRUE(read_gemm_probe(file, "k", 1010, 3600));
}

TEST(GemmProbeCache, KeepsTheNewestEntries) {
  testing::TempDir dir;
  const auto file = dir / "gemm-probe.json";
  for (int i = 0; i <= kMaxGemmProbeEntries; ++i) {
    write_gemm_probe(file, "k" + std::to_string(i), probe_of(10 + i, 0), 1000 + i);
  }
  EXPECT_FALSE(read_gemm_probe(file, "k0", 1100, 3600));  // the oldest went
  for (int i = 1; i <= kMaxGemmProbeEntries; ++i) {
    EXPECT_TRUE(read_gemm_probe(file, "k" + std::to_string(i), 1100, 3600)) << i;
  }
}

// Sets an environment variable for the test's duration.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const std::string& value) : name(n) {
    if (const char* v = std::getenv(n)) old = v;
    ::setenv(n, value.c_str(), 1);
  }
  ~ScopedEnv() { old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str()); }
};

TEST(GemmProbeCache, DetectHardwareReadsATrustworthyProbeAndTheDoctorsOptionsMeasure) {
  testing::TempDir dir;
  ScopedEnv env("HWTRAIN_CACHE", dir.path().string());
  ASSERT_EQ(gemm_probe_cache_file(), dir / "gemm-probe.json");
  DetectOptions no_probe;
  no_probe.run_gemm_benchmark = false;
  const HardwareProfile quick = detect_hardware(no_probe);
  ASSERT_GT(quick.math.peak_fp32_gflops, 0);
  const std::string key = gemm_probe_key(quick, at::get_num_threads());
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // A plausible reading of this machine at this process's threads: read back.
  const double fp32 = 0.5 * quick.math.peak_fp32_gflops + 0.25, bf16 = 0.3 * quick.math.peak_bf16_gflops;
  CachedGemmProbe good = probe_of(fp32, bf16);
  good.rates.threads = at::get_num_threads();
  write_gemm_probe(gemm_probe_cache_file(), key, good, now - 10);
  const HardwareProfile cached = detect_hardware();
  EXPECT_TRUE(cached.math.gemm_measured);
  EXPECT_DOUBLE_EQ(cached.math.fp32_gemm_gflops, fp32);
  EXPECT_DOUBLE_EQ(cached.math.bf16_gemm_gflops, bf16);
  EXPECT_EQ(cached.math.gemm_size, 512);
  // What is not trustworthy is measured again: ten times the ISA peak, another thread count, or a
  // busy machine's reading older than five minutes.
  CachedGemmProbe too_fast = good, other_threads = good, busy = good;
  too_fast.rates.fp32_gflops = 10 * quick.math.peak_fp32_gflops;
  other_threads.rates.threads = at::get_num_threads() + 1;
  busy.load_average = quick.cpu.num_logical_threads + 4;
  for (const auto& [bad, age] : {std::pair{too_fast, 10.0}, {other_threads, 10.0}, {busy, 400.0}}) {
    write_gemm_probe(gemm_probe_cache_file(), key, bad, now - age);
    EXPECT_NE(detect_hardware().math.fp32_gemm_gflops, bad.rates.fp32_gflops);
  }
  DetectOptions fresh;
  fresh.gemm_cache_max_age_s = 0;
  write_gemm_probe(gemm_probe_cache_file(), key, good, now - 10);
  const HardwareProfile measured = detect_hardware(fresh);
  EXPECT_TRUE(measured.math.gemm_measured);
  EXPECT_NE(measured.math.fp32_gemm_gflops, fp32);
  // ... and refreshes the entry (unless its reading was contended: under a tenth of the ISA peak).
  if (measured.math.fp32_gemm_gflops >= 0.1 * quick.math.peak_fp32_gflops) {
    const auto entry = read_gemm_probe(gemm_probe_cache_file(), key, now + 60, 3600);
    ASSERT_TRUE(entry);
    EXPECT_DOUBLE_EQ(entry->rates.fp32_gflops, measured.math.fp32_gemm_gflops);
  }
}

// A process stopped while it holds the probe's lock (Ctrl-Z mid-measurement) does not stall later
// starts: they wait a bounded time, then measure without it.
TEST(GemmProbeCache, ALockHeldByAStoppedProcessIsWaitedForABoundedTime) {
  testing::TempDir dir;
  ScopedEnv env("HWTRAIN_CACHE", dir.path().string());
  std::filesystem::create_directories(gemm_probe_cache_file().parent_path());
  const std::string lock_file = gemm_probe_cache_file().string() + ".lock";
  const int fd = ::open(lock_file.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // another open file: as another process's lock
  DetectOptions o;
  o.gemm_lock_wait_s = 0.3;
  const auto start = std::chrono::steady_clock::now();
  const HardwareProfile p = detect_hardware(o);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  EXPECT_TRUE(p.math.gemm_measured);
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 60.0);  // not until the holder lets go (it never does here)
}

}  // namespace
}  // namespace hwt
