#include "hwtrain/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/core/strings.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors stores little-endian data; this writer copies memory as is");

namespace hwt {

namespace {

using json = nlohmann::json;

// Python's safetensors refuses headers above 100 MB; a larger length means a corrupt file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct Dtype {
  const char* name;
  torch::ScalarType type;
  uint64_t itemsize;
  int rank;  // position in the reference implementation's Dtype enum, which orders the layout
};

const std::vector<Dtype>& dtypes() {
  static const std::vector<Dtype> table = {
      {"F64", torch::kFloat64, 8, 12}, {"F32", torch::kFloat32, 4, 11}, {"F16", torch::kFloat16, 2, 7},
      {"BF16", torch::kBFloat16, 2, 8}, {"I64", torch::kInt64, 8, 13}, {"I32", torch::kInt32, 4, 9},
      {"I16", torch::kInt16, 2, 5},     {"I8", torch::kInt8, 1, 2},     {"U8", torch::kUInt8, 1, 1},
      {"BOOL", torch::kBool, 1, 0},
  };
  return table;
}

std::vector<std::string> dtype_names() {
  std::vector<std::string> names;
  for (const auto& d : dtypes()) names.push_back(d.name);
  return names;
}

const Dtype& dtype_of(torch::ScalarType type) {
  for (const auto& d : dtypes()) {
    if (d.type == type) return d;
  }
  throw IoError(std::string("safetensors cannot store dtype ") + c10::toString(type) +
                "; supported: " + join(dtype_names()));
}

const Dtype* dtype_named(const std::string& name) {
  for (const auto& d : dtypes()) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string errno_text() { return std::strerror(errno); }

// Writes everything or throws; the caller removes the temp file on failure.
void write_all(int fd, const void* data, size_t size, const fs::path& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot write " + path.string() + ": " + errno_text());
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

class HeaderParser {
 public:
  explicit HeaderParser(const fs::path& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw IoError(path_.string() + ": invalid safetensors file: " + problem);
  }

  // Parses the JSON, rejecting duplicate keys (nlohmann would silently keep the last one).
  json parse(const std::string& text) const {
    std::vector<std::set<std::string>> open_objects;
    std::string duplicate;
    size_t duplicate_depth = 0;
    auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
      // A header nests 3 levels; nlohmann builds deeper ones recursively ("[[[[..." of 100 MB: GBs).
      if (depth > kMaxJsonDepth) fail("header nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      if (event == json::parse_event_t::object_start) open_objects.emplace_back();
      if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
      if (event == json::parse_event_t::key && !open_objects.empty() && duplicate.empty()) {
        const std::string key = parsed.get<std::string>();
        if (!open_objects.back().insert(key).second) {
          duplicate = key;
          duplicate_depth = open_objects.size();
        }
      }
      return true;
    };
    json header;
    try {
      header = json::parse(text, on_event);
    } catch (const json::exception& e) {
      fail(std::string("header is not valid JSON (") + e.what() + ")");
    }
    if (!duplicate.empty()) {
      fail(duplicate_depth == 1 ? "duplicate tensor name '" + duplicate + "' in header"
                                : "duplicate key '" + duplicate + "' in header");
    }
    if (!header.is_object()) fail("header is not a JSON object");
    return header;
  }

  std::map<std::string, std::string> metadata(const json& value) const {
    if (!value.is_object()) fail("\"__metadata__\" must be an object of string values");
    std::map<std::string, std::string> out;
    for (const auto& [key, v] : value.items()) {
      if (!v.is_string()) fail("\"__metadata__\" value for '" + key + "' is not a string");
      out[key] = v.get<std::string>();
    }
    return out;
  }

  SafetensorsEntry entry(const std::string& name, const json& value, uint64_t data_size) const {
    const std::string where = "tensor '" + name + "'";
    if (!value.is_object()) fail(where + " is not an object");
    for (const auto& [key, v] : value.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        fail(where + " has unknown field '" + key + "' (valid: dtype, shape, data_offsets)");
      }
    }
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(key)) fail(where + " has no '" + key + "'");
    }
    SafetensorsEntry e;
    e.name = name;
    const json& dtype = value["dtype"];
    if (!dtype.is_string()) fail(where + " has a dtype that is not a string");
    const Dtype* known = dtype_named(dtype.get<std::string>());
    if (known == nullptr) {
      fail(where + " has unknown dtype '" + dtype.get<std::string>() + "' (valid: " +
           join(dtype_names()) + ")");
    }
    e.dtype = known->type;
    const json& shape = value["shape"];
    if (!shape.is_array()) fail(where + " has a shape that is not a list");
    uint64_t numel = 1;
    int64_t extent = 1;
    for (const auto& dim : shape) {
      if (!dim.is_number_unsigned()) {
        fail(where + " has shape " + shape.dump() + "; dimensions must be non-negative integers");
      }
      const uint64_t d = dim.get<uint64_t>();
      if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, d, &numel)) {
        fail(where + " has shape " + shape.dump() + " whose element count overflows");
      }
      // Strides multiply the dimensions with a 0 counted as 1: [0, 2^62, 4] holds nothing yet
      // overflows them (LibTorch: "Stride calculation overflowed").
      if (d > 1 && __builtin_mul_overflow(extent, d, &extent)) {
        fail(where + " has shape " + shape.dump() + " whose strides overflow");
      }
      e.shape.push_back(static_cast<int64_t>(d));
    }
    const json& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      fail(where + " has data_offsets " + offsets.dump() +
           "; expected [begin, end] with non-negative integers");
    }
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    if (e.begin > e.end) fail(where + " has data_offsets " + offsets.dump() + " with begin > end");
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, known->itemsize, &nbytes) || nbytes != e.end - e.begin) {
      fail(where + " (" + known->name + ", shape " + shape.dump() + ") needs " +
           std::to_string(numel) + " x " + std::to_string(known->itemsize) +
           " bytes but data_offsets " + offsets.dump() + " span " +
           std::to_string(e.end - e.begin));
    }
    if (e.end > data_size) {
      fail(where + " has data_offsets " + offsets.dump() + " beyond the data section of " +
           std::to_string(data_size) + " bytes (file truncated?)");
    }
    return e;
  }

  // The byte ranges, sorted by offset, must cover [0, data_size) exactly once.
  void check_tiling(const std::vector<SafetensorsEntry>& sorted, uint64_t data_size) const {
    uint64_t cursor = 0;
    const SafetensorsEntry* previous = nullptr;
    for (const auto& e : sorted) {
      if (e.begin < cursor) {
        fail("tensors '" + previous->name + "' and '" + e.name + "' overlap in the data section");
      }
      if (e.begin > cursor) {
        fail(std::to_string(e.begin - cursor) + " unused bytes before tensor '" + e.name +
             "' (data ranges must be contiguous)");
      }
      cursor = e.end;
      previous = &e;
    }
    if (cursor != data_size) {
      fail(std::to_string(data_size - cursor) + " trailing bytes after the last tensor");
    }
  }

 private:
  fs::path path_;
};

}  // namespace

std::string safetensors_dtype_name(torch::ScalarType dtype) { return dtype_of(dtype).name; }

void save_safetensors(const fs::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  struct Item {
    std::string name;
    torch::Tensor data;
    const Dtype* dtype;
  };
  std::vector<Item> items;
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    if (name == kMetadataKey) throw IoError("cannot save a tensor named '__metadata__' to " + path.string());
    if (!names.insert(name).second) {
      throw IoError("cannot save " + path.string() + ": duplicate tensor name '" + name + "'");
    }
    if (!tensor.defined()) throw IoError("cannot save " + path.string() + ": tensor '" + name + "' is undefined");
    const Dtype* dtype = &dtype_of(tensor.scalar_type());
    items.push_back({name, tensor.detach().to(torch::kCPU).contiguous(), dtype});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    // The reference order (dtype rank descending, then name) also sorts item sizes descending.
    if (a.dtype->rank != b.dtype->rank) return a.dtype->rank > b.dtype->rank;
    return a.name < b.name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const auto& item : items) {
    const uint64_t nbytes = item.data.nbytes();
    header[item.name] = {{"dtype", item.dtype->name},
                         {"shape", item.data.sizes().vec()},
                         {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw IoError("cannot save " + path.string() + ": a tensor name or metadata string is not UTF-8");
  }
  // Padding to 8 bytes keeps the data section (and, with the sort above, each tensor) aligned.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const uint64_t header_size = header_text.size();

  const fs::path tmp = temp_sibling(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("cannot write " + path.string() + ": " + errno_text());
  try {
    write_all(fd, &header_size, sizeof(header_size), path);
    write_all(fd, header_text.data(), header_text.size(), path);
    for (const auto& item : items) {
      if (item.data.nbytes() > 0) write_all(fd, item.data.data_ptr(), item.data.nbytes(), path);
    }
    if (::fsync(fd) != 0) throw IoError("cannot flush " + path.string() + ": " + errno_text());
    const int rc = ::close(fd);
    fd = -1;
    if (rc != 0) throw IoError("cannot close " + path.string() + ": " + errno_text());
    rename_durable(tmp, path);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
}

bool SafetensorsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& t) { return t.first == name; });
}

torch::Tensor SafetensorsFile::get(const std::string& name) const {
  std::vector<std::string> names;
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
    names.push_back(n);
  }
  throw IoError(path.string() + " has no tensor '" + name + "'" + did_you_mean(name, names));
}

uint64_t check_safetensors_header_length(const fs::path& path, uint64_t file_size, std::string_view prefix) {
  HeaderParser parser(path);
  if (file_size < kSafetensorsLengthBytes || prefix.size() < kSafetensorsLengthBytes) {
    parser.fail("file has " + std::to_string(file_size) + " bytes, fewer than the 8-byte header length");
  }
  uint64_t header_size = 0;
  std::memcpy(&header_size, prefix.data(), sizeof(header_size));
  if (header_size > kMaxHeaderBytes) {
    parser.fail("header length " + std::to_string(header_size) + " exceeds the limit of " +
                std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (header_size > file_size - kSafetensorsLengthBytes) {
    parser.fail("header length " + std::to_string(header_size) + " exceeds the file size of " +
                std::to_string(file_size) + " bytes (file truncated?)");
  }
  return header_size;
}

SafetensorsHeader parse_safetensors_header(const fs::path& path, uint64_t file_size, std::string_view header_text) {
  HeaderParser parser(path);
  SafetensorsHeader header;
  header.data_start = kSafetensorsLengthBytes + header_text.size();
  if (header.data_start > file_size) parser.fail("header runs past the end of the file (file truncated?)");
  const uint64_t data_size = file_size - header.data_start;
  const json parsed = parser.parse(std::string(header_text));
  for (const auto& [key, value] : parsed.items()) {
    if (key == kMetadataKey) {
      header.metadata = parser.metadata(value);
    } else {
      header.entries.push_back(parser.entry(key, value, data_size));
    }
  }
  auto by_offset = [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  };
  std::stable_sort(header.entries.begin(), header.entries.end(), by_offset);
  parser.check_tiling(header.entries, data_size);
  return header;
}

SafetensorsFile load_safetensors(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw IoError("cannot read " + path.string() + ": " +
                  (fs::exists(path, ec) ? "not a regular file" : "no such file"));
  }
  const uint64_t file_size = fs::file_size(path, ec);
  if (ec) throw IoError("cannot read " + path.string() + ": " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read " + path.string() + ": " + errno_text());

  std::string prefix(std::min(file_size, kSafetensorsLengthBytes), '\0');
  in.read(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  if (!in) throw IoError("error while reading the header of " + path.string());
  const uint64_t header_size = check_safetensors_header_length(path, file_size, prefix);
  std::string header_text(header_size, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_size));
  if (!in) throw IoError("error while reading the header of " + path.string());
  SafetensorsHeader header = parse_safetensors_header(path, file_size, header_text);

  SafetensorsFile file;
  file.path = path;
  file.metadata = std::move(header.metadata);
  // Ranges tile the data section, so reading them in order is one sequential pass.
  for (const auto& e : header.entries) {
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
    const uint64_t nbytes = e.end - e.begin;
    if (nbytes > 0) {
      in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(nbytes));
      if (!in) throw IoError("error while reading tensor '" + e.name + "' from " + path.string());
    }
    file.tensors.emplace_back(e.name, std::move(t));
  }
  return file;
}

}  // namespace hwt
