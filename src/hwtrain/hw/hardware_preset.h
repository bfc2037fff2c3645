// Named hardware presets for planning on paper: "h100-80gb" with 64 GPUs describes 8 nodes of
// 8 H100s (host CPU and memory of a DGX node) without having one. Figures come from gpu_specs.h,
// and the network each GPU has to other nodes (which the spec table names but does not quantify)
// from inter_node_gbs_per_gpu below.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

// The profile of `num_gpus` accelerators of model `name` (nodes = ceil(num_gpus / per node)),
// or nullopt when `name` is not a preset. Throws HardwareError when num_gpus < 1.
// `num_nodes` > 0: the GPUs spread over that many nodes (`hwtrain plan --gpus G --nodes N`), else as
// many as the preset's GPUs per node need.
std::optional<HardwareProfile> hardware_preset(const std::string& name, int num_gpus = 1, int num_nodes = 0);

// The preset names, for messages and `--help`: "a100-40gb", "a100-80gb", "h100-80gb", ...
std::vector<std::string> hardware_preset_names();

// GB/s per direction that one GPU can send to other nodes (its share of the node's NICs), for the
// standard server of the profile's GPU model (gpu_specs.h); 0 when the profile has one node or a
// GPU model the table does not know. The planner's data-parallel and pipeline costs use it.
double inter_node_gbs_per_gpu(const HardwareProfile& hw);

}  // namespace hwt
