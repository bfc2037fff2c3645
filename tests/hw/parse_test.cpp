// The pure parsers behind detection: cgroup files, /proc/meminfo, CPU lists, build strings.
#include <gtest/gtest.h>

#include "hwtrain/hw/cgroup.h"
#include "hwtrain/hw/cpu_info.h"
#include "hwtrain/hw/env_info.h"
#include "hwtrain/hw/math_libs.h"
#include "hwtrain/hw/memory_info.h"
#include "hwtrain/hw/software_info.h"
#include "hwtrain/hw/sysfs.h"

namespace hwt {
namespace {

TEST(Cgroup, CpuMax) {
  EXPECT_EQ(parse_cpu_max("max 100000\n"), 0);
  EXPECT_DOUBLE_EQ(parse_cpu_max("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(parse_cpu_max("200000"), 2.0);  // period defaults to 100 ms
  EXPECT_EQ(parse_cpu_max(""), 0);
  EXPECT_EQ(cfs_quota_cpus(-1, 100000), 0);
  EXPECT_DOUBLE_EQ(cfs_quota_cpus(50000, 100000), 0.5);
}

TEST(Cgroup, QuotaCapsUsableCores) {
  int cores = 8, threads = 16;
  apply_cpu_quota(1.5, &cores, &threads);
  EXPECT_EQ(cores, 2);
  EXPECT_EQ(threads, 2);
  cores = 2, threads = 2;
  apply_cpu_quota(0, &cores, &threads);
  EXPECT_EQ(cores, 2);
  apply_cpu_quota(0.2, &cores, &threads);
  EXPECT_EQ(cores, 1);
}

TEST(Cgroup, MemoryLimit) {
  EXPECT_EQ(parse_memory_limit("max\n"), 0);
  EXPECT_EQ(parse_memory_limit("9223372036854771712\n"), 0);  // v1 "unlimited"
  EXPECT_EQ(parse_memory_limit("4294967296\n"), int64_t{4294967296});
  EXPECT_EQ(parse_stat_value("anon 5\ninactive_file 1234\nactive_file 9\n", "inactive_file"), 1234);
  EXPECT_EQ(parse_stat_value("anon 5\n", "inactive_file"), 0);
}

TEST(Cgroup, FindsV2AndV1Directories) {
  std::string mountinfo =
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  std::string proc = "4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n0::/user.slice/x\n";
  CgroupDirs d = find_cgroup_dirs(proc, mountinfo);
  ASSERT_EQ(d.v1_memory.size(), 3u);
  EXPECT_EQ(d.v1_memory[0], "/sys/fs/cgroup/memory/docker/abc");
  EXPECT_EQ(d.v1_memory[1], "/sys/fs/cgroup/memory/docker");
  EXPECT_EQ(d.v1_memory[2], "/sys/fs/cgroup/memory");
  ASSERT_FALSE(d.v1_cpu.empty());
  EXPECT_EQ(d.v1_cpu[0], "/sys/fs/cgroup/cpu/docker/abc");
  ASSERT_FALSE(d.v2.empty());
  EXPECT_EQ(d.v2[0], "/sys/fs/cgroup/unified/user.slice/x");
}

TEST(Cgroup, NamespacedMountRootIsStripped) {
  std::string mountinfo = "30 20 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  CgroupDirs d = find_cgroup_dirs("0::/docker/abc\n", mountinfo);
  ASSERT_EQ(d.v2.size(), 1u);
  EXPECT_EQ(d.v2[0], "/sys/fs/cgroup");
  EXPECT_TRUE(d.v1_memory.empty());
}

TEST(Memory, CgroupLimitWins) {
  std::string meminfo = "MemTotal:       16384000 kB\nMemFree: 1 kB\nMemAvailable:    8192000 kB\n";
  MemoryInfo m = memory_from_meminfo(meminfo, 0, 0);
  EXPECT_EQ(m.total_bytes, int64_t{16384000} * 1024);
  EXPECT_EQ(m.available_bytes, int64_t{8192000} * 1024);
  EXPECT_EQ(m.effective_total_bytes, m.total_bytes);
  EXPECT_EQ(m.effective_available_bytes, m.available_bytes);
  int64_t limit = int64_t{4} << 30, used = int64_t{1} << 30;
  m = memory_from_meminfo(meminfo, limit, used);
  EXPECT_EQ(m.effective_total_bytes, limit);
  EXPECT_EQ(m.effective_available_bytes, limit - used);
}

TEST(Sysfs, CpuListsAndSizes) {
  EXPECT_EQ(sysfs::parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_TRUE(sysfs::parse_cpu_list("").empty());
  EXPECT_EQ(sysfs::parse_size_suffix("1024K\n"), 1024 * 1024);
  EXPECT_EQ(sysfs::parse_size_suffix("32M"), 32 * 1024 * 1024);
  EXPECT_EQ(sysfs::colon_value("model name\t: AMD EPYC\ncpu MHz\t\t: 2596.1\n", "cpu MHz"), "2596.1");
}

TEST(MathLibs, BuildSettingsAndVersions) {
  std::string config =
      "PyTorch built with:\n  - Intel(R) MKL-DNN v3.10.2 (Git Hash f1d4)\n"
      "  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, CUDA_VERSION=13.0, "
      "CUDNN_VERSION=9.19.0, USE_CUDA=ON, USE_NCCL=1, \n";
  EXPECT_EQ(build_setting(config, "BLAS_INFO"), "mkl");
  EXPECT_EQ(build_setting(config, "CUDA_VERSION"), "13.0");
  EXPECT_EQ(build_setting(config, "USE_CUDA"), "ON");
  EXPECT_EQ(build_setting(config, "USE_MPI"), "");
  EXPECT_EQ(version_after("Intel(R) MKL-DNN v3.10.2 (Git Hash f1d4)", " v"), "3.10.2");
  EXPECT_EQ(version_after("no version here", " v"), "");
  EXPECT_EQ(mkl_code_path_name(0), "generic (SSE2)");
  EXPECT_EQ(mkl_code_path_name(5), "AVX2");
  EXPECT_EQ(mkl_code_path_name(7), "AVX-512");
  EXPECT_EQ(nccl_version_string(22703), "2.27.3");
  EXPECT_EQ(nccl_version_string(2804), "2.8.4");
}

TEST(Env, AllocatorAndThreadParsing) {
  EXPECT_EQ(allocator_from_library("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"), Allocator::Jemalloc);
  EXPECT_EQ(allocator_from_library("/lib/x86_64-linux-gnu/libc.so.6"), Allocator::Glibc);
  EXPECT_EQ(allocator_from_library("/usr/lib/libtcmalloc_minimal.so.4"), Allocator::Tcmalloc);
  EXPECT_EQ(allocator_from_library("./my_program"), Allocator::Other);
  EXPECT_EQ(parse_thread_count("4"), 4);
  EXPECT_EQ(parse_thread_count("4,2"), 4);
  EXPECT_EQ(parse_thread_count(""), 0);
  EXPECT_EQ(parse_thread_count("x"), 0);
  EXPECT_EQ(parse_thread_count(" 8 , 2"), 8);
  EXPECT_EQ(parse_thread_count("4abc"), 0);  // libgomp ignores it whole, so LibTorch's default stands
  EXPECT_EQ(parse_thread_count("4,"), 0);
  EXPECT_EQ(parse_thread_count("0"), 0);
}

}  // namespace
}  // namespace hwt
