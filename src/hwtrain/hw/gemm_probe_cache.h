// The GEMM probe's rates kept between runs on one machine. Every command that plans (train, eval,
// generate, plan, a sweep's trials) probes fp32 and bf16 GEMMs for about 0.7 s; run one after
// another they would each measure what the last one did. A probe younger than an hour, taken on
// the same machine, boot, core count, threads and LibTorch/BLAS build, is read back instead (as
// FFTW keeps its wisdom), and the run says so. hw/hardware_profile.cpp decides what is kept and
// reused: not a contended or implausible reading, a busy machine's for 5 minutes only, and one
// process measures under a lock while the others started with it wait for its result.
//
// The file: gemm-probe.json in $HWTRAIN_CACHE, else in ~/.cache/hwtrain/ (where scripts/install-deps.sh
// keeps LibTorch's virtual environment). Written atomically; read with a size bound and strictly (anything unexpected
// is ignored and the machine probed again); at most kMaxEntries keys, the oldest dropped.
// `hwtrain doctor` always probes afresh (and refreshes the entry).
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "hwtrain/hw/gemm_bench.h"

namespace hwt {

struct HardwareProfile;

struct CachedGemmProbe {
  GemmBenchResult rates;
  double load_average = 0;  // when measured
  double age_seconds = 0;
};

constexpr int kMaxGemmProbeEntries = 16;

// The cache file, or empty when no directory is known (neither HWTRAIN_CACHE nor HOME set).
std::filesystem::path gemm_probe_cache_file();

// What a cached probe must match: the CPU and its cores, the boot, the threads, LibTorch and its BLAS.
std::string gemm_probe_key(const HardwareProfile& p, int threads);

// The entry for `key` measured at most `max_age_s` before `now` (seconds since the epoch), if any.
std::optional<CachedGemmProbe> read_gemm_probe(const std::filesystem::path& file, const std::string& key, double now,
                                               double max_age_s);

// Records `probe` (measured at `now`) under `key`; failures (a read-only home) are ignored.
void write_gemm_probe(const std::filesystem::path& file, const std::string& key, const CachedGemmProbe& probe,
                      double now);

}  // namespace hwt
