#include "hwtrain/train/sharded_checkpoint.h"

#include "hwtrain/io/mapped_safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <map>

#include "hwtrain/core/error.h"
#include "hwtrain/core/fault_injection.h"
#include "hwtrain/core/json_integer.h"
#include "hwtrain/core/files.h"
#include "hwtrain/dist/segments.h"
#include "hwtrain/io/safetensors.h"

namespace hwt {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxWorldSize = 1 << 16;
constexpr uint64_t kMaxManifestBytes = 64u << 20;
constexpr int64_t kMaxElements = int64_t{1} << 40;

struct ShardingManifest {
  int world_size = 0;
  std::map<std::string, std::vector<int64_t>> shapes;
};

// A JSON integer in [lo, hi] (core/json_integer.h), or IoError naming `what`.
int64_t json_integer(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what) {
  if (!is_json_integer_in(v, lo, hi)) {
    throw IoError(what + " is " + v.dump() + ", expected an integer in [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
  }
  return v.get<int64_t>();
}

// sharding.json, checked as untrusted input: a world size in [1, 65536], shapes of at most 8
// dimensions with at most 2^40 elements.
ShardingManifest read_manifest(const fs::path& dir) {
  const fs::path path = dir / kShardingManifest;
  ShardingManifest m;
  try {
    const auto j = nlohmann::json::parse(read_regular_file(path, kMaxManifestBytes));
    m.world_size = static_cast<int>(json_integer(j.at("world_size"), 1, kMaxWorldSize, "world_size"));
    if (!j.at("shapes").is_object()) throw IoError("shapes is not an object of name: [dims]");
    for (const auto& [name, dims] : j.at("shapes").items()) {
      if (!dims.is_array() || dims.size() > 8) throw IoError("the shape of '" + name + "' is not a list of <= 8 dims");
      std::vector<int64_t> shape;
      int64_t n = 1;
      for (const auto& dim : dims) {
        const int64_t d = json_integer(dim, 0, kMaxElements, "a dimension of '" + name + "'");
        if (d > 0 && n > kMaxElements / d) throw IoError("the shape of '" + name + "' has over 2^40 elements");
        n *= d;
        shape.push_back(d);
      }
      m.shapes[name] = std::move(shape);
    }
  } catch (const std::exception& e) {
    throw IoError(path.string() + " is malformed: " + e.what() +
                  " (expected {\"world_size\": N, \"shapes\": {name: [dims]}})");
  }
  return m;
}

// Every shard's entries under `prefix` ("model." or "optimizer."), the prefix removed.
NamedTensors shard_entries(const fs::path& dir, int world_size, const std::string& prefix) {
  NamedTensors out;
  for (int r = 0; r < world_size; ++r) {
    const fs::path file = dir / shard_file_name(r, world_size);
    if (!fs::is_regular_file(file)) {
      throw IoError("sharded checkpoint " + dir.string() + " lacks " + file.filename().string() + " (rank " +
                    std::to_string(r) + " of " + std::to_string(world_size) + ")");
    }
    for (auto& [name, t] : load_safetensors(file).tensors) {
      if (name.rfind(prefix, 0) != 0) continue;
      if (name.find('@') == std::string::npos) {  // a shard holds segments only
        throw IoError(file.string() + ": entry '" + name + "' is not a segment (<name>@<offset>)");
      }
      out.emplace_back(name.substr(prefix.size()), std::move(t));
    }
  }
  return out;
}

// The joined tensors must be exactly the ones the manifest implies: none missing, none extra.
void check_keys(const NamedTensors& joined, std::vector<std::string> expected, const fs::path& dir) {
  std::vector<std::string> got;
  for (const auto& [name, t] : joined) got.push_back(name);
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  if (got == expected) return;
  std::vector<std::string> missing;
  std::set_difference(expected.begin(), expected.end(), got.begin(), got.end(), std::back_inserter(missing));
  throw IoError("sharded checkpoint " + dir.string() + ": its shards hold " + std::to_string(got.size()) + " of the " +
                std::to_string(expected.size()) + " tensors " + kShardingManifest + " implies" +
                (missing.empty() ? std::string() : "; first missing: '" + missing.front() + "'"));
}

}  // namespace

std::string shard_file_name(int rank, int world_size) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "shard-%05d-of-%05d.safetensors", rank, world_size);
  return buf;
}

void write_checkpoint_shard(const fs::path& staging, int rank, int world_size, const NamedTensors& weights,
                            const NamedTensors& optimizer_state) {
  NamedTensors entries;
  for (const auto& [name, t] : weights) entries.emplace_back("model." + name, t.detach().to(torch::kCPU));
  for (const auto& [name, t] : optimizer_state) entries.emplace_back("optimizer." + name, t.detach().to(torch::kCPU));
  save_safetensors(staging / shard_file_name(rank, world_size), entries, {{"format", "hwtrain-shard"}});
  fault_point("shard");
}

void write_sharding_manifest(const fs::path& staging, int world_size, const ParameterShapes& shapes) {
  nlohmann::json j;
  j["world_size"] = world_size;
  j["shapes"] = nlohmann::json::object();
  for (const auto& [name, shape] : shapes) j["shapes"][name] = shape;
  write_file_atomic(staging / kShardingManifest, j.dump(1));
}

std::string checkpoint_model_format(const fs::path& dir) {
  if (fs::exists(dir / kShardingManifest)) return "hwtrain-gpt";
  const MappedSafetensors file(dir / "model.safetensors");  // the header only is read
  const auto it = file.metadata().find("format");
  return it == file.metadata().end() ? "hwtrain-gpt" : it->second;
}

void require_builtin_model_checkpoint(const fs::path& dir) {
  const std::string format = checkpoint_model_format(dir);
  if (format == "hwtrain-gpt") return;
  throw IoError("checkpoint " + dir.string() + " holds a library model (format '" + format +
                "', a user's TrainableModel trained by train_model or the Trainer), not one of hwtrain's own: "
                "load it with Trainer::resume_from and that model");
}

NamedTensors read_checkpoint_weights(const fs::path& dir) {
  if (!fs::exists(dir / kShardingManifest)) return load_safetensors(dir / "model.safetensors").tensors;
  const ShardingManifest m = read_manifest(dir);
  ShapeOf shape_of = [&](const std::string& key) -> std::optional<std::vector<int64_t>> {
    auto it = m.shapes.find(key);
    return it == m.shapes.end() ? std::nullopt : std::optional<std::vector<int64_t>>(it->second);
  };
  NamedTensors whole = join_segments(shard_entries(dir, m.world_size, "model."), shape_of,
                                     "sharded checkpoint " + dir.string());
  std::vector<std::string> expected;
  for (const auto& [name, shape] : m.shapes) expected.push_back(name);
  check_keys(whole, expected, dir);
  return whole;
}

NamedTensors read_checkpoint_optimizer(const fs::path& dir) {
  NamedTensors state = load_safetensors(dir / "optimizer.safetensors").tensors;
  if (!fs::exists(dir / kShardingManifest)) return state;
  const ShardingManifest m = read_manifest(dir);
  ShapeOf shape_of = [&](const std::string& key) -> std::optional<std::vector<int64_t>> {
    const size_t dot = key.find('.');
    if (dot == std::string::npos) return std::nullopt;
    const std::string kind = key.substr(0, dot), param = key.substr(dot + 1);
    auto it = m.shapes.find(param);
    if (it == m.shapes.end() || (kind != "exp_avg" && kind != "exp_avg_sq" && kind != "step")) return std::nullopt;
    return kind == "step" ? std::vector<int64_t>{} : it->second;
  };
  NamedTensors joined =
      join_segments(shard_entries(dir, m.world_size, "optimizer."), shape_of, "sharded checkpoint " + dir.string());
  std::vector<std::string> expected;
  for (const auto& [name, shape] : m.shapes) {
    for (const char* kind : {"exp_avg.", "exp_avg_sq.", "step."}) expected.push_back(kind + name);
  }
  check_keys(joined, expected, dir);
  for (auto& entry : joined) state.push_back(std::move(entry));
  return state;
}

}  // namespace hwt
