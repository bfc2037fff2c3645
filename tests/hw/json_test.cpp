// HardwareProfile JSON: round trips, and a strict reader whose errors name the key at fault.
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/hw/hardware_preset.h"
#include "hwtrain/hw/hardware_profile.h"

namespace hwt {
namespace {

using nlohmann::json;

json detected_json() {
  DetectOptions o;
  o.run_gemm_benchmark = false;
  return to_json(detect_hardware(o));
}

// The message of the HardwareError `j` raises, or "" when it is accepted.
std::string error_of(const json& j) {
  try {
    hardware_from_json(j, "hw.json");
  } catch (const HardwareError& e) {
    return e.what();
  }
  return "";
}

TEST(HardwareJson, DetectedProfileRoundTrips) {
  json j = detected_json();
  HardwareProfile p = hardware_from_json(j);
  EXPECT_EQ(to_json(p), j);
}

TEST(HardwareJson, PresetWithGpusRoundTrips) {
  HardwareProfile p = *hardware_preset("a100-80gb", 16);
  p.math.gemm_measured = true;
  p.math.fp32_gemm_gflops = 123.5;
  p.env.allocator = Allocator::Tcmalloc;
  json j = to_json(p);
  HardwareProfile back = hardware_from_json(j);
  EXPECT_EQ(to_json(back), j);
  ASSERT_EQ(back.gpus.size(), 16u);
  EXPECT_EQ(back.gpus[3].name, p.gpus[3].name);
  EXPECT_EQ(back.num_nodes, 2);
  EXPECT_EQ(back.env.allocator, Allocator::Tcmalloc);
  EXPECT_DOUBLE_EQ(back.math.fp32_gemm_gflops, 123.5);
}

TEST(HardwareJson, MissingKeyIsNamed) {
  json j = detected_json();
  j["cpu"].erase("num_physical_cores");
  std::string e = error_of(j);
  EXPECT_NE(e.find("hw.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'cpu.num_physical_cores'"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
}

TEST(HardwareJson, WrongTypeIsNamed) {
  json j = detected_json();
  j["memory"]["total_bytes"] = "lots";
  std::string e = error_of(j);
  EXPECT_NE(e.find("'memory.total_bytes'"), std::string::npos) << e;
  EXPECT_NE(e.find("integer"), std::string::npos) << e;
  j = detected_json();
  j["cpu"]["isa"]["avx2"] = 1;
  EXPECT_NE(error_of(j).find("'cpu.isa.avx2'"), std::string::npos) << error_of(j);
}

TEST(HardwareJson, UnknownKeyIsNamedWithSuggestion) {
  json j = detected_json();
  j["cpu"]["modle"] = "x";
  std::string e = error_of(j);
  EXPECT_NE(e.find("'cpu.modle'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown"), std::string::npos) << e;
  EXPECT_NE(e.find("model"), std::string::npos) << e;
}

TEST(HardwareJson, GpuEntriesAreCheckedByIndex) {
  json j = to_json(*hardware_preset("l4", 2));
  j["gpus"][1].erase("name");
  EXPECT_NE(error_of(j).find("'gpus[1].name'"), std::string::npos) << error_of(j);
  j = to_json(*hardware_preset("l4", 2));
  j["gpus"][0]["total_memory_bytes"] = 0;
  EXPECT_NE(error_of(j).find("'gpus[0].total_memory_bytes'"), std::string::npos) << error_of(j);
}

TEST(HardwareJson, InvalidValuesAreRejected) {
  json j = detected_json();
  j["cpu"]["num_physical_cores"] = 0;
  EXPECT_NE(error_of(j).find("'cpu.num_physical_cores'"), std::string::npos);
  j = detected_json();
  j["env"]["allocator"] = "jemaloc";
  std::string e = error_of(j);
  EXPECT_NE(e.find("'env.allocator'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'jemalloc'"), std::string::npos) << e;
  j = detected_json();
  j["version"] = 99;
  EXPECT_NE(error_of(j).find("'version'"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("object"), std::string::npos);
  EXPECT_NE(error_of(json{{"cpu", json::object()}}).find("'version'"), std::string::npos);
}

TEST(HardwareJson, PresetDocument) {
  HardwareProfile p = hardware_from_json(json{{"preset", "h100-80gb"}, {"num_gpus", 16}});
  EXPECT_EQ(p.gpus.size(), 16u);
  EXPECT_EQ(p.num_nodes, 2);
  EXPECT_EQ(p.source, "preset:h100-80gb");
  std::string e = error_of(json{{"preset", "h100"}});
  EXPECT_NE(e.find("'preset'"), std::string::npos) << e;
  EXPECT_NE(e.find("h100-80gb"), std::string::npos) << e;  // the list of valid names
  EXPECT_NE(error_of(json{{"preset", "l4"}, {"num_gpus", 0}}).find("'num_gpus'"), std::string::npos);
  EXPECT_NE(error_of(json{{"preset", "l4"}, {"gpus", 2}}).find("'gpus'"), std::string::npos);
}

}  // namespace
}  // namespace hwt
