// The TensorBoard event file format, written without TensorFlow or protobuf:
// - ProtoWriter: the few protobuf wire types an Event needs (varint, fixed64 double, fixed32
//   float, length-delimited bytes).
// - encode_*_event(): tensorflow.Event messages (event.proto / summary.proto field numbers).
// - tfrecord_frame() / read_tfrecords(): TFRecord framing, i.e. uint64 length (little endian),
//   masked CRC32C of those 8 bytes, the data, masked CRC32C of the data.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace hwt {

class ProtoWriter {
 public:
  void varint_field(int field, uint64_t value);  // wire type 0 (int64 as two's complement)
  void double_field(int field, double value);    // wire type 1
  void float_field(int field, float value);      // wire type 5
  void bytes_field(int field, const std::string& bytes);  // wire type 2 (strings, messages)

  const std::string& bytes() const { return out_; }

 private:
  void tag(int field, int wire_type);
  void varint(uint64_t value);
  void little_endian(uint64_t value, int num_bytes);

  std::string out_;
};

// The Event opening every event file: { wall_time = 1, file_version = 3: "brain.Event:2" }.
std::string encode_file_version_event(double wall_time);

// Event{ wall_time = 1, step = 2, summary = 5: Summary{ value = 1: [ Value{ tag = 1,
// simple_value = 2 } ] } } with one Value per (tag, value) pair.
std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, float>>& scalars);

// One TFRecord: length, masked CRC32C of the length bytes, data, masked CRC32C of the data.
std::string tfrecord_frame(const std::string& data);

// The payloads of a TFRecord file. Throws DataError naming the file and offset on a bad length
// or checksum; a truncated final record (a killed writer) ends the list without error.
std::vector<std::string> read_tfrecords(const std::filesystem::path& path);

}  // namespace hwt
