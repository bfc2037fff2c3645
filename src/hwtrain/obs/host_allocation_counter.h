// Live bytes of CPU tensors, the host counterpart of CUDA's allocated/peak statistics
// (torch.cuda.max_memory_allocated). install_host_allocation_counter() puts a counting allocator
// in front of c10's CPU allocator; from then on every CPU tensor's storage is counted while it
// lives. Unlike the resident set it leaves out what the malloc keeps cached or fragmented, and it
// sees nothing that oneDNN/MKL allocate outside c10 (their scratch buffers). Benchmarks use it to
// say what a training step needs; the trainer does not install it.
#pragma once

#include <cstdint>

namespace hwt {

// Idempotent; returns false where c10 kept a higher-priority CPU allocator.
bool install_host_allocation_counter();
bool host_allocation_counter_installed();

struct HostAllocation {
  int64_t current_bytes;  // storage of live CPU tensors allocated since installation
  int64_t peak_bytes;     // highest current_bytes since installation or the last reset
};
HostAllocation host_allocation();
void reset_host_allocation_peak();  // peak := current

}  // namespace hwt
