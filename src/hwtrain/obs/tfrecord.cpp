#include "hwtrain/obs/tfrecord.h"

#include <cstring>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"

namespace hwt {

namespace {
enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Field numbers of tensorflow/core/util/event.proto and framework/summary.proto.
constexpr int kEventWallTime = 1;
constexpr int kEventStep = 2;
constexpr int kEventFileVersion = 3;
constexpr int kEventSummary = 5;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1;
constexpr int kValueSimpleValue = 2;

void append_le(std::string& out, uint64_t value, int num_bytes) {
  for (int i = 0; i < num_bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t load_le(const unsigned char* p, int num_bytes) {
  uint64_t v = 0;
  for (int i = num_bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

void ProtoWriter::tag(int field, int wire_type) {
  varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::varint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtoWriter::little_endian(uint64_t value, int num_bytes) { append_le(out_, value, num_bytes); }

void ProtoWriter::varint_field(int field, uint64_t value) {
  tag(field, kVarint);
  varint(value);
}

void ProtoWriter::double_field(int field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  tag(field, kFixed64);
  little_endian(bits, 8);
}

void ProtoWriter::float_field(int field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  tag(field, kFixed32);
  little_endian(bits, 4);
}

void ProtoWriter::bytes_field(int field, const std::string& bytes) {
  tag(field, kLengthDelimited);
  varint(bytes.size());
  out_ += bytes;
}

std::string encode_file_version_event(double wall_time) {
  ProtoWriter event;
  event.double_field(kEventWallTime, wall_time);
  event.bytes_field(kEventFileVersion, "brain.Event:2");
  return event.bytes();
}

std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, float>>& scalars) {
  ProtoWriter summary;
  for (const auto& [tag, value] : scalars) {
    ProtoWriter v;
    v.bytes_field(kValueTag, tag);
    v.float_field(kValueSimpleValue, value);
    summary.bytes_field(kSummaryValue, v.bytes());
  }
  ProtoWriter event;
  event.double_field(kEventWallTime, wall_time);
  event.varint_field(kEventStep, static_cast<uint64_t>(step));
  event.bytes_field(kEventSummary, summary.bytes());
  return event.bytes();
}

std::string tfrecord_frame(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  append_le(out, data.size(), 8);
  append_le(out, crc32c_masked(crc32c(out.data(), 8)), 4);
  out += data;
  append_le(out, crc32c_masked(crc32c(data.data(), data.size())), 4);
  return out;
}

std::vector<std::string> read_tfrecords(const std::filesystem::path& path) {
  const std::string bytes = read_file(path);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::vector<std::string> records;
  size_t pos = 0;
  while (bytes.size() - pos >= 12) {
    const std::string where = path.string() + " at byte " + std::to_string(pos);
    uint64_t length = load_le(p + pos, 8);
    if (load_le(p + pos + 8, 4) != crc32c_masked(crc32c(p + pos, 8))) {
      throw DataError("bad length checksum in TFRecord file " + where);
    }
    if (length > bytes.size() - pos - 12 || bytes.size() - pos - 12 - length < 4) break;
    const unsigned char* data = p + pos + 12;
    if (load_le(data + length, 4) != crc32c_masked(crc32c(data, length))) {
      throw DataError("bad data checksum in TFRecord file " + where);
    }
    records.emplace_back(reinterpret_cast<const char*>(data), length);
    pos += 12 + length + 4;
  }
  return records;
}

}  // namespace hwt
