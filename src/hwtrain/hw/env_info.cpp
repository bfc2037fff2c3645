// Process environment detection (see env_info.h).
#include "hwtrain/hw/env_info.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace hwt {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// A thread count as set: "" when unset, "''" when set to nothing (libgomp rejects that one as an
// "Invalid value"; it is not the same as unset).
std::string thread_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return "";
  return v[0] == '\0' ? "''" : v;
}

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

template <typename T>
bool mallctl_read(Mallctl ctl, const char* name, T* out) {
  size_t size = sizeof(T);
  return ctl(name, out, &size, nullptr, 0) == 0;
}

void describe_jemalloc(EnvInfo* e) {
  auto ctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (ctl == nullptr) return;
  std::ostringstream s;
  const char* version = nullptr;
  if (mallctl_read(ctl, "version", &version) && version != nullptr) s << "jemalloc " << version;
  ssize_t dirty = 0, muzzy = 0;
  if (mallctl_read(ctl, "opt.dirty_decay_ms", &dirty)) {
    e->jemalloc_dirty_decay_ms = dirty;
    s << ", dirty_decay_ms=" << dirty;
  }
  if (mallctl_read(ctl, "opt.muzzy_decay_ms", &muzzy)) s << ", muzzy_decay_ms=" << muzzy;
  if (!s.str().empty()) e->allocator_detail = s.str();
}

}  // namespace

std::string to_string(Allocator a) {
  switch (a) {
    case Allocator::Glibc: return "glibc";
    case Allocator::Jemalloc: return "jemalloc";
    case Allocator::Tcmalloc: return "tcmalloc";
    case Allocator::Mimalloc: return "mimalloc";
    case Allocator::Other: return "other";
  }
  return "other";
}

Allocator allocator_from_library(const std::string& path) {
  if (path.find("jemalloc") != std::string::npos) return Allocator::Jemalloc;
  if (path.find("tcmalloc") != std::string::npos) return Allocator::Tcmalloc;
  if (path.find("mimalloc") != std::string::npos) return Allocator::Mimalloc;
  if (path.find("libc.so") != std::string::npos || path.find("libc-") != std::string::npos)
    return Allocator::Glibc;
  return Allocator::Other;
}

bool valid_thread_count(const std::string& value) {
  size_t start = 0;
  while (true) {
    const size_t end = std::min(value.find(',', start), value.size());
    std::string part = value.substr(start, end - start);
    part.erase(0, part.find_first_not_of(" \t"));  // libgomp skips blanks around each number
    part.erase(part.find_last_not_of(" \t") + 1);
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos) return false;
    if (std::stoi(part) < 1) return false;
    if (end == value.size()) return true;
    start = end + 1;
  }
}

int parse_thread_count(const std::string& value) { return valid_thread_count(value) ? std::stoi(value) : 0; }

EnvInfo detect_env() {
  EnvInfo e;
  e.omp_num_threads = thread_env("OMP_NUM_THREADS");
  e.mkl_num_threads = thread_env("MKL_NUM_THREADS");
  e.openblas_num_threads = thread_env("OPENBLAS_NUM_THREADS");
  e.openblas_coretype = env("OPENBLAS_CORETYPE");
  e.malloc_arena_max = env("MALLOC_ARENA_MAX");
  e.malloc_conf = env("MALLOC_CONF");
  e.ld_preload = env("LD_PRELOAD");
  e.torch_intra_op_threads = at::get_num_threads();
  e.torch_inter_op_threads = at::get_num_interop_threads();

  // The malloc every allocation goes through is the first definition in the global scope.
  void* addr = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info{};
  std::string lib = (addr != nullptr && dladdr(addr, &info) != 0 && info.dli_fname != nullptr)
                        ? info.dli_fname
                        : "";
  e.allocator = allocator_from_library(lib);
  if (e.allocator == Allocator::Other) {
    // Statically linked allocators live in the executable itself: recognise them by their API.
    if (dlsym(RTLD_DEFAULT, "mallctl") != nullptr) e.allocator = Allocator::Jemalloc;
    else if (dlsym(RTLD_DEFAULT, "tc_malloc") != nullptr) e.allocator = Allocator::Tcmalloc;
    else if (dlsym(RTLD_DEFAULT, "mi_malloc") != nullptr) e.allocator = Allocator::Mimalloc;
  }
  e.allocator_detail = lib;
  if (e.allocator == Allocator::Jemalloc) describe_jemalloc(&e);
  if (e.allocator == Allocator::Glibc)
    e.allocator_detail =
        lib + (e.malloc_arena_max.empty() ? "" : ", MALLOC_ARENA_MAX=" + e.malloc_arena_max);
  return e;
}

}  // namespace hwt
