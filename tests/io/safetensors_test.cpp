// Safetensors: round trips across dtypes and shapes, the byte layout of the reference writer, and
// rejection of every kind of malformed file (bytes crafted by hand).
#include "hwtrain/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file with the given header text (unpadded) and data bytes; header_len overrides the length.
std::string craft(const std::string& header, const std::string& data,
                  int64_t header_len = -1) {
  const uint64_t n = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
  return le64(n) + header + data;
}

template <class T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return s;
}

// Expects load_safetensors to throw an IoError whose message names the file and contains `what`.
void expect_rejected(const TempDir& tmp, const std::string& bytes, const std::string& what) {
  const auto path = tmp.write("bad.safetensors", bytes);
  try {
    load_safetensors(path);
    FAIL() << "accepted a malformed file; expected an error containing: " << what;
  } catch (const IoError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(Safetensors, RoundTripsDtypesShapesAndMetadata) {
  TempDir tmp;
  torch::manual_seed(0);
  NamedTensors tensors = {
      {"f32", torch::randn({3, 4})},
      {"bf16", torch::randn({5}).to(torch::kBFloat16)},
      {"f16", torch::randn({2, 3}).to(torch::kFloat16)},
      {"f64", torch::randn({2}, torch::kFloat64)},
      {"i64", torch::arange(-3, 7, torch::kInt64).reshape({2, 5})},
      {"i32", torch::tensor({-7, 8}, torch::kInt32)},
      {"u8", torch::arange(0, 250, 7).to(torch::kUInt8)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(3.5f)},
      {"empty", torch::empty({2, 0})},
      {"strided", torch::arange(12, torch::kFloat32).reshape({3, 4}).t()},  // not contiguous
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "42"}};
  const auto path = tmp / "model.safetensors";
  save_safetensors(path, tensors, metadata);

  const SafetensorsFile file = load_safetensors(path);
  EXPECT_EQ(file.metadata, metadata);
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (const auto& [name, original] : tensors) {
    const torch::Tensor loaded = file.get(name);
    EXPECT_EQ(loaded.scalar_type(), original.scalar_type()) << name;
    EXPECT_EQ(loaded.sizes(), original.sizes()) << name;
    EXPECT_TRUE(torch::equal(loaded, original)) << name;
  }
  EXPECT_EQ(file.get("scalar").dim(), 0);
  EXPECT_EQ(file.get("empty").numel(), 0);
  // Only the final file remains: the temp file was renamed into place.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path()), {}), 1);
}

TEST(Safetensors, GetNamesTheMissingTensorAndFile) {
  TempDir tmp;
  const auto path = tmp / "m.safetensors";
  save_safetensors(path, {{"wte.weight", torch::zeros({2})}});
  const auto file = load_safetensors(path);
  EXPECT_TRUE(file.contains("wte.weight"));
  EXPECT_FALSE(file.contains("wpe.weight"));
  try {
    file.get("wte.weight2");
    FAIL();
  } catch (const IoError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("wte.weight2"), std::string::npos) << msg;
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
  }
}

TEST(Safetensors, WritesTheReferenceLayout) {
  // The Python `safetensors` package writes __metadata__ first, tensors ordered by dtype (wider
  // first) then name, fields dtype/shape/data_offsets, and pads the header with spaces to 8 bytes.
  TempDir tmp;
  const auto path = tmp / "ref.safetensors";
  save_safetensors(path,
                   {{"a", torch::tensor({1.0f, 2.0f})}, {"b", torch::tensor({int64_t{7}})},
                    {"c", torch::tensor({uint8_t{9}})}},
                   {{"format", "pt"}});
  std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("c":{"dtype":"U8","shape":[1],"data_offsets":[16,17]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string expected =
      le64(header.size()) + header + bytes_of<int64_t>({7}) + bytes_of<float>({1.0f, 2.0f}) + "\x09";
  EXPECT_EQ(read_file(path), expected);
}

TEST(Safetensors, OrdersTensorsByReferenceDtypeRank) {
  // The reference sorts by its Dtype enum descending (I64 > F64 > F32 > BF16 > F16 > BOOL), then name.
  TempDir tmp;
  const auto path = tmp / "order.safetensors";
  save_safetensors(path, {{"a_bool", torch::tensor({true})},
                          {"b_f16", torch::zeros({1}, torch::kFloat16)},
                          {"c_bf16", torch::zeros({1}, torch::kBFloat16)},
                          {"d_f64", torch::zeros({1}, torch::kFloat64)},
                          {"e_i64", torch::zeros({1}, torch::kInt64)},
                          {"f_f32", torch::zeros({1})},
                          {"g_f32", torch::zeros({1})}});
  std::vector<std::string> order;
  for (const auto& [name, t] : load_safetensors(path).tensors) order.push_back(name);
  EXPECT_EQ(order, (std::vector<std::string>{"e_i64", "d_f64", "f_f32", "g_f32", "c_bf16", "b_f16", "a_bool"}));
}

TEST(Safetensors, ReadsAFileInThePythonLayout) {
  // Bytes as Python's safetensors.torch.save_file writes them, built by hand.
  TempDir tmp;
  std::string header =
      R"({"__metadata__":{"format":"pt"},"emb":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("h":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]},)"
      R"("mask":{"dtype":"BOOL","shape":[3],"data_offsets":[20,23]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  // bf16 1.0 = 0x3f80, -2.0 = 0xc000
  const std::string data = bytes_of<float>({1.f, 2.f, 3.f, 4.f}) + bytes_of<uint16_t>({0x3f80, 0xc000}) +
                           std::string("\x01\x00\x01", 3);
  const auto path = tmp.write("py.safetensors", craft(header, data));
  const auto file = load_safetensors(path);
  EXPECT_EQ(file.metadata.at("format"), "pt");
  ASSERT_EQ(file.tensors.size(), 3u);
  EXPECT_EQ(file.tensors[0].first, "emb");  // file order
  EXPECT_TRUE(torch::equal(file.get("emb"), torch::tensor({1.f, 2.f, 3.f, 4.f}).reshape({2, 2})));
  EXPECT_TRUE(torch::equal(file.get("h"), torch::tensor({1.f, -2.f}).to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(file.get("mask"), torch::tensor({true, false, true})));
}

TEST(Safetensors, AcceptsAnEmptyFileOfTensors) {
  TempDir tmp;
  const auto path = tmp / "none.safetensors";
  save_safetensors(path, {});
  const auto file = load_safetensors(path);
  EXPECT_TRUE(file.tensors.empty());
  EXPECT_TRUE(file.metadata.empty());
}

TEST(Safetensors, RejectsBadSaves) {
  TempDir tmp;
  const auto path = tmp / "x.safetensors";
  EXPECT_THROW(save_safetensors(path, {{"a", torch::zeros({1})}, {"a", torch::zeros({1})}}), IoError);
  EXPECT_THROW(save_safetensors(path, {{"__metadata__", torch::zeros({1})}}), IoError);
  EXPECT_THROW(save_safetensors(path, {{"c", torch::zeros({1}, torch::kComplexFloat)}}), IoError);
  EXPECT_THROW(save_safetensors(tmp / "no-such-dir" / "x.safetensors", {{"a", torch::zeros({1})}}), IoError);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path()), {}), 0);
}

const std::string kGood = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
const std::string kGoodData(8, '\0');

TEST(Safetensors, CraftedGoodFileLoads) {
  // The baseline the malformed cases below are variations of.
  TempDir tmp;
  const auto path = tmp.write("good.safetensors", craft(kGood, kGoodData));
  EXPECT_EQ(load_safetensors(path).get("a").numel(), 2);
}

TEST(Safetensors, RejectsShortFileAndBadHeaderLength) {
  TempDir tmp;
  expect_rejected(tmp, "", "fewer than the 8-byte header length");
  expect_rejected(tmp, std::string(5, '\0'), "fewer than the 8-byte header length");
  expect_rejected(tmp, craft(kGood, kGoodData, 10'000), "exceeds the file size");
  expect_rejected(tmp, craft(kGood, kGoodData, 200'000'000), "exceeds the limit");
  expect_rejected(tmp, le64(~0ull), "exceeds the limit");
}

TEST(Safetensors, RejectsHeadersThatAreNotAJsonObject) {
  TempDir tmp;
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32",)", kGoodData), "not valid JSON");
  expect_rejected(tmp, craft("\xff\xfe{}", ""), "not valid JSON");
  expect_rejected(tmp, craft("[1,2]", ""), "not a JSON object");
  expect_rejected(tmp, craft("", ""), "not valid JSON");
  expect_rejected(tmp, craft(R"({"a":[1]})", ""), "tensor 'a' is not an object");
}

TEST(Safetensors, RejectsBadTensorEntries) {
  TempDir tmp;
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", kGoodData),
                  "unknown dtype 'F31'");
  expect_rejected(tmp, craft(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", kGoodData),
                  "dtype that is not a string");
  expect_rejected(tmp, craft(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", kGoodData), "has no 'dtype'");
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", kGoodData), "has no 'shape'");
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":[2]}})", kGoodData), "has no 'data_offsets'");
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", kGoodData),
                  "unknown field 'x'");
}

TEST(Safetensors, RejectsBadShapes) {
  TempDir tmp;
  for (const std::string shape : {"[-2]", "[2.0]", "2", "[\"2\"]", "[[2]]", "null"}) {
    expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,8]}})", kGoodData),
                    "shape");
  }
  expect_rejected(tmp,
                  craft(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", kGoodData),
                  "overflows");
  // No elements, yet strides that overflow (LibTorch failed with "Stride calculation overflowed").
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", ""),
                  "whose strides overflow");
}

// Nesting that nlohmann would build recursively (8 MB of '[' took 1 GB) fails at the bound.
TEST(Safetensors, RejectsDeeplyNestedHeaders) {
  TempDir tmp;
  expect_rejected(tmp, craft(std::string(100000, '['), ""), "nested deeper than 64 levels");
  expect_rejected(tmp, craft(R"({"__metadata__":)" + std::string(70, '[') + std::string(70, ']') + "}", ""),
                  "nested deeper than 64 levels");
}

TEST(Safetensors, RejectsBadOffsets) {
  TempDir tmp;
  for (const std::string offsets : {"[0]", "[0,8,8]", "[-1,8]", "[0,8.0]", "\"0,8\"", "[0,\"8\"]"}) {
    expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":)" + offsets + "}}", kGoodData),
                    "expected [begin, end]");
  }
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", kGoodData),
                  "begin > end");
  // Size disagrees with shape x itemsize.
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", kGoodData),
                  "needs 3 x 4 bytes");
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", kGoodData),
                  "needs 2 x 8 bytes");
  // Beyond the data section (the file is truncated).
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(6, '\0')),
                  "beyond the data section");
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", kGoodData),
                  "beyond the data section");
}

TEST(Safetensors, RejectsOverlapsHolesAndTrailingBytes) {
  TempDir tmp;
  const std::string data16(16, '\0');
  expect_rejected(tmp,
                  craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data16),
                  "overlap");
  expect_rejected(tmp,
                  craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", kGoodData),
                  "overlap");
  expect_rejected(tmp,
                  craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data16),
                  "4 unused bytes before tensor 'b'");
  expect_rejected(tmp, craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0')),
                  "4 unused bytes before tensor 'a'");
  expect_rejected(tmp, craft(kGood, kGoodData + "xyz"), "3 trailing bytes");
  expect_rejected(tmp, craft("{}", "x"), "1 trailing bytes");
}

TEST(Safetensors, RejectsDuplicateNamesAndBadMetadata) {
  TempDir tmp;
  const std::string data16(16, '\0');
  expect_rejected(tmp,
                  craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data16),
                  "duplicate tensor name 'a'");
  expect_rejected(tmp, craft(R"({"__metadata__":{"k":"v","k":"w"}})", ""), "duplicate key 'k'");
  expect_rejected(tmp, craft(R"({"__metadata__":{"k":1}})", ""), "value for 'k' is not a string");
  expect_rejected(tmp, craft(R"({"__metadata__":["k"]})", ""), "\"__metadata__\" must be an object");
  expect_rejected(tmp, craft(R"({"__metadata__":{"k":{"n":"v"}}})", ""), "value for 'k' is not a string");
}

TEST(Safetensors, ZeroSizedTensorsMayShareAnOffset) {
  TempDir tmp;
  const auto path = tmp.write(
      "z.safetensors",
      craft(R"({"e1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
            R"("e2":{"dtype":"I64","shape":[3,0],"data_offsets":[0,0]},)"
            R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", kGoodData));
  const auto file = load_safetensors(path);
  EXPECT_EQ(file.get("e2").sizes(), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(file.get("a").numel(), 2);
}

TEST(Safetensors, MissingFileIsAnIoError) {
  TempDir tmp;
  EXPECT_THROW(load_safetensors(tmp / "absent.safetensors"), IoError);
  EXPECT_THROW(load_safetensors(tmp.path()), IoError);
}

}  // namespace
}  // namespace hwt
