// Named accelerator presets for planning on paper.
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/hw/gpu_specs.h"
#include "hwtrain/hw/hardware_preset.h"

namespace hwt {
namespace {

TEST(Preset, RequiredPresetsExist) {
  for (const char* name : {"a100-40gb", "a100-80gb", "h100-80gb", "h200", "l4", "rtx4090"}) {
    auto p = hardware_preset(name, 1);
    ASSERT_TRUE(p.has_value()) << name;
    ASSERT_EQ(p->gpus.size(), 1u) << name;
    const GpuInfo& g = p->gpus[0];
    EXPECT_FALSE(g.name.empty()) << name;
    EXPECT_GT(g.total_memory_bytes, int64_t{16} << 30) << name;
    EXPECT_GT(g.free_memory_bytes, 0) << name;
    EXPECT_LT(g.free_memory_bytes, g.total_memory_bytes) << name;
    EXPECT_GE(g.cc_major, 8) << name;
    EXPECT_TRUE(g.bf16) << name;
    EXPECT_GT(g.peak_bf16_tflops, 50) << name;
    EXPECT_FALSE(g.interconnect.empty()) << name;
    EXPECT_TRUE(g.usable_by_torch) << name;
    EXPECT_EQ(p->source, std::string("preset:") + name);
    EXPECT_GE(p->cpu.num_physical_cores, 1) << name;
    EXPECT_GT(p->memory.effective_available_bytes, 0) << name;
  }
}

TEST(Preset, MemoryOrdersAsMarketed) {
  auto mem = [](const char* n) { return hardware_preset(n, 1)->gpus[0].total_memory_bytes; };
  EXPECT_LT(mem("a100-40gb"), mem("a100-80gb"));
  EXPECT_LT(mem("l4"), mem("a100-40gb"));
  EXPECT_LT(mem("h100-80gb"), mem("h200"));
}

TEST(Preset, VoltaHasNoBf16) {
  auto p = hardware_preset("v100-32gb", 1);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->gpus[0].bf16);
  EXPECT_GT(p->gpus[0].peak_fp16_tflops, 0);
}

TEST(Preset, NodesFromGpuCount) {
  auto p = hardware_preset("h100-80gb", 64);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->gpus.size(), 64u);
  EXPECT_EQ(p->num_nodes, 8);
  EXPECT_FALSE(p->inter_node_link.empty());
  EXPECT_EQ(hardware_preset("h100-80gb", 8)->num_nodes, 1);
  EXPECT_EQ(hardware_preset("h100-80gb", 9)->num_nodes, 2);
  EXPECT_TRUE(hardware_preset("h100-80gb", 8)->inter_node_link.empty());
  // `plan --gpus 4 --nodes 2`: 8 GPUs over 2 nodes, joined by the preset's link (it printed none).
  const auto spread = hardware_preset("h100-80gb", 8, 2);
  EXPECT_EQ(spread->num_nodes, 2);
  EXPECT_EQ(spread->inter_node_link, p->inter_node_link);
}

TEST(Preset, UnknownNameIsNullopt) {
  EXPECT_FALSE(hardware_preset("h100", 1).has_value());
  EXPECT_FALSE(hardware_preset("", 1).has_value());
  EXPECT_THROW(hardware_preset("l4", 0), HardwareError);
}

TEST(Preset, NamesListsEveryPreset) {
  std::vector<std::string> names = hardware_preset_names();
  EXPECT_GE(names.size(), 6u);
  for (const std::string& n : names) EXPECT_TRUE(hardware_preset(n, 1).has_value()) << n;
}

TEST(Preset, DetectedModelsGetDataSheetFigures) {
  const GpuSpec* a100 = find_gpu_spec("NVIDIA A100-SXM4-80GB", int64_t{80} << 30);
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->preset, "a100-80gb");
  EXPECT_EQ(find_gpu_spec("NVIDIA A100-PCIE-40GB", int64_t{40} << 30)->preset, "a100-40gb");
  EXPECT_EQ(find_gpu_spec("NVIDIA L4", int64_t{22} << 30)->preset, "l4");
  EXPECT_EQ(find_gpu_spec("NVIDIA L40S", int64_t{45} << 30), nullptr);
  EXPECT_EQ(find_gpu_spec("Some Future GPU", int64_t{45} << 30), nullptr);
}

}  // namespace
}  // namespace hwt
