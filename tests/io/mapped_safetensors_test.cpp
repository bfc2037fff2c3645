// MappedSafetensors against load_safetensors, the reference it shares its header checks with: the
// same tensors (every dtype, 0-element and 0-dim ones, metadata, file order), zero-copy views that
// outlive the reader, a copy for misaligned bytes, and the same one-line errors for malformed files.
#include "hwtrain/io/mapped_safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "hwtrain/core/error.h"
#include "hwtrain/io/safetensors.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

// A file of the given header text (its length in the first 8 bytes unless `claimed_len` is set).
std::string mapped_case(const std::string& header, const std::string& data, int64_t claimed_len = -1) {
  const uint64_t n = claimed_len < 0 ? header.size() : static_cast<uint64_t>(claimed_len);
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s + header + data;
}

// The message of the IoError `f` throws ("" when it throws none).
template <class F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

void expect_same_bytes(const torch::Tensor& a, const torch::Tensor& b, const std::string& name) {
  EXPECT_EQ(a.scalar_type(), b.scalar_type()) << name;
  EXPECT_EQ(a.sizes(), b.sizes()) << name;
  ASSERT_EQ(a.nbytes(), b.nbytes()) << name;
  if (a.nbytes() > 0) {
    EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()), 0) << name;
  }
}

TEST(MappedSafetensors, EqualsLoadSafetensorsOnEveryDtype) {
  TempDir tmp;
  torch::manual_seed(0);
  const NamedTensors tensors = {
      {"f64", torch::randn({2, 3}, torch::kFloat64)},
      {"f32", torch::randn({3, 4})},
      {"bf16", torch::randn({5, 2}).to(torch::kBFloat16)},
      {"f16", torch::randn({7}).to(torch::kFloat16)},
      {"i64", torch::arange(-3, 7, torch::kInt64).reshape({2, 5})},
      {"i32", torch::tensor({-7, 8, 9}, torch::kInt32)},
      {"i16", torch::tensor({-300, 300}, torch::kInt16)},
      {"i8", torch::tensor({-1, 2, 3}, torch::kInt8)},
      {"u8", torch::arange(0, 250, 7).to(torch::kUInt8)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(3.5f)},
      {"empty", torch::empty({2, 0})},
      {"empty_bf16", torch::empty({0}, torch::kBFloat16)},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const auto path = tmp / "all.safetensors";
  save_safetensors(path, tensors, metadata);

  const SafetensorsFile loaded = load_safetensors(path);
  const MappedSafetensors mapped(path);
  EXPECT_EQ(mapped.path(), path);
  EXPECT_EQ(mapped.metadata(), loaded.metadata);
  const NamedTensors views = mapped.tensors();
  ASSERT_EQ(views.size(), loaded.tensors.size());
  for (size_t i = 0; i < views.size(); ++i) {
    EXPECT_EQ(views[i].first, loaded.tensors[i].first);  // the same (file) order
    expect_same_bytes(views[i].second, loaded.tensors[i].second, views[i].first);
    EXPECT_TRUE(mapped.contains(views[i].first));
  }
  EXPECT_EQ(mapped.get("scalar").dim(), 0);
  EXPECT_EQ(mapped.get("empty").sizes(), (std::vector<int64_t>{2, 0}));
  EXPECT_FALSE(mapped.contains("f128"));
}

TEST(MappedSafetensors, GivesZeroCopyViewsThatOutliveTheReader) {
  TempDir tmp;
  const auto path = tmp / "m.safetensors";
  const torch::Tensor w = torch::randn({64, 32});
  save_safetensors(path, {{"w", w}, {"b", torch::zeros({32}, torch::kBFloat16)}});
  torch::Tensor view;
  {
    const MappedSafetensors mapped(path);
    view = mapped.get("w");
    EXPECT_EQ(mapped.get("w").data_ptr(), view.data_ptr());  // the mapped bytes, not a copy
    mapped.release_pages("w");                               // dropped from the RSS, still readable
    EXPECT_TRUE(torch::equal(view, w));
  }
  EXPECT_TRUE(torch::equal(view, w));  // the view keeps the mapping alive
  torch::Tensor param = torch::empty({64, 32}, torch::kBFloat16);
  param.copy_(view);  // how callers use them: copied, here with a dtype conversion
  EXPECT_TRUE(torch::equal(param, w.to(torch::kBFloat16)));
}

TEST(MappedSafetensors, CopiesAMisalignedTensor) {
  // Legal in the format, never written by Python's safetensors: an F32 tensor at data offset 1.
  TempDir tmp;
  const float values[2] = {1.5f, -2.f};
  std::string data(1, '\x07');
  data.append(reinterpret_cast<const char*>(values), sizeof(values));
  std::string header =
      R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-aligned, "f" does not
  const auto path = tmp.write("odd.safetensors", mapped_case(header, data));
  const MappedSafetensors mapped(path);
  const SafetensorsFile loaded = load_safetensors(path);
  for (const auto& [name, t] : loaded.tensors) expect_same_bytes(mapped.get(name), t, name);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mapped.get("f").data_ptr()) % 4, 0u);
}

TEST(MappedSafetensors, RejectsMalformedFilesWithLoadSafetensorsErrors) {
  TempDir tmp;
  const std::string good = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data8(8, '\0');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "fewer than the 8-byte header length"},
      {std::string(5, '\0'), "fewer than the 8-byte header length"},
      {mapped_case(good, data8, 200'000'000), "exceeds the limit"},  // oversized header
      {mapped_case(good, data8, 10'000), "exceeds the file size"},
      {mapped_case(good, std::string(6, '\0')), "beyond the data section"},  // truncated
      {mapped_case(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data8),  // past the end
       "beyond the data section"},
      {mapped_case(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                   std::string(16, '\0')),
       "overlap"},
      {mapped_case(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8), "needs 3 x 4 bytes"},
      {mapped_case(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", data8), "unknown dtype 'F31'"},
      {mapped_case(R"({"a":{"dtype":"F32",)", data8), "not valid JSON"},
      {mapped_case(good, data8 + "xyz"), "3 trailing bytes"},
      {mapped_case(R"({"__metadata__":{"k":1}})", ""), "value for 'k' is not a string"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto path = tmp.write("bad" + std::to_string(i) + ".safetensors", cases[i].first);
    const std::string mapped_error = io_error_of([&] { MappedSafetensors m(path); });
    const std::string loaded_error = io_error_of([&] { load_safetensors(path); });
    EXPECT_EQ(mapped_error, loaded_error) << "case " << i;
    EXPECT_NE(mapped_error.find(path.string()), std::string::npos) << mapped_error;
    EXPECT_NE(mapped_error.find(cases[i].second), std::string::npos) << mapped_error;
    EXPECT_EQ(mapped_error.find('\n'), std::string::npos) << mapped_error;  // one line
  }
}

TEST(MappedSafetensors, MissingFilesAndTensorsAreIoErrors) {
  TempDir tmp;
  EXPECT_EQ(io_error_of([&] { MappedSafetensors m(tmp / "absent.safetensors"); }),
            io_error_of([&] { load_safetensors(tmp / "absent.safetensors"); }));
  EXPECT_EQ(io_error_of([&] { MappedSafetensors m(tmp.path()); }), io_error_of([&] { load_safetensors(tmp.path()); }));
  const auto path = tmp / "m.safetensors";
  save_safetensors(path, {{"wte.weight", torch::zeros({2})}});
  const MappedSafetensors mapped(path);
  const std::string error = io_error_of([&] { mapped.get("wte.weight2"); });
  EXPECT_NE(error.find("wte.weight2"), std::string::npos) << error;
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_THROW(mapped.release_pages("nope"), IoError);
}

TEST(MappedSafetensors, ReadsAFileWithoutTensors) {
  TempDir tmp;
  const auto path = tmp / "none.safetensors";
  save_safetensors(path, {}, {{"k", "v"}});
  const MappedSafetensors mapped(path);
  EXPECT_TRUE(mapped.names().empty());
  EXPECT_EQ(mapped.metadata().at("k"), "v");
}

}  // namespace
}  // namespace hwt
