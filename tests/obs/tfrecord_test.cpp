// TensorBoard event files: CRC32C against RFC 3720, protobuf pieces, an Event and its TFRecord
// frame against bytes worked out by hand, and the sink's file read back.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"
#include "hwtrain/obs/tensorboard_sink.h"
#include "hwtrain/obs/tfrecord.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int v : b) s.push_back(static_cast<char>(v));
  return s;
}

std::string hex(const std::string& s) {
  std::string out;
  char buf[4];
  for (unsigned char c : s) {
    std::snprintf(buf, sizeof buf, "%02x ", c);
    out += buf;
  }
  return out;
}

TEST(Crc32c, Rfc3720Vectors) {
  unsigned char zeros[32], ones[32], ascending[32];
  std::memset(zeros, 0x00, 32);
  std::memset(ones, 0xff, 32);
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(zeros, 32), 0x8a9136aau);
  EXPECT_EQ(crc32c(ones, 32), 0x62a8ab43u);
  EXPECT_EQ(crc32c(ascending, 32), 0x46dd794eu);
  // Extending in two pieces gives the one-piece value.
  EXPECT_EQ(crc32c_extend(crc32c(ascending, 10), ascending + 10, 22), 0x46dd794eu);
}

TEST(ProtoWriter, Varints) {
  ProtoWriter w;
  w.varint_field(2, 300);  // tag (2<<3)|0 = 0x10; 300 = 0b10_0101100 -> 0xac 0x02
  EXPECT_EQ(hex(w.bytes()), hex(bytes({0x10, 0xac, 0x02})));
  ProtoWriter neg;
  neg.varint_field(2, static_cast<uint64_t>(int64_t{-1}));  // int64 -1: ten bytes, 9 x 0xff, 0x01
  EXPECT_EQ(hex(neg.bytes()),
            hex(bytes({0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})));
}

TEST(ProtoWriter, FixedAndLengthDelimited) {
  ProtoWriter w;
  w.double_field(1, -2.0);  // tag 0x09; -2.0 = 0xc000000000000000, little endian
  w.float_field(2, 0.5f);   // tag 0x15; 0.5f = 0x3f000000, little endian
  w.bytes_field(3, "ab");   // tag 0x1a, length 2
  EXPECT_EQ(hex(w.bytes()), hex(bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0x15, 0, 0, 0, 0x3f,
                                       0x1a, 0x02, 'a', 'b'})));
}

// Event{ wall_time: 1.5, step: 3, summary { value { tag: "loss" simple_value: 2.0 } } }
//   09 <1.5 as double LE: 00 00 00 00 00 00 f8 3f>   field 1, wire type 1
//   10 03                                             field 2, varint 3
//   2a 0d                                             field 5, 13 bytes of Summary:
//     0a 0b                                             Summary.value (field 1), 11 bytes:
//       0a 04 'l' 'o' 's' 's'                             Value.tag (field 1), 4 bytes
//       15 <2.0f LE: 00 00 00 40>                         Value.simple_value (field 2, fixed32)
const std::string kLossEvent = bytes({0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f,
                                      0x10, 0x03,
                                      0x2a, 0x0d,
                                      0x0a, 0x0b,
                                      0x0a, 0x04, 'l', 'o', 's', 's',
                                      0x15, 0x00, 0x00, 0x00, 0x40});

TEST(EventEncoding, ScalarEventMatchesHandEncoding) {
  EXPECT_EQ(hex(encode_scalars_event(1.5, 3, {{"loss", 2.0f}})), hex(kLossEvent));
}

TEST(EventEncoding, FileVersionEvent) {
  // 09 <1.5> then 1a 0d "brain.Event:2" (field 3, 13 bytes); no step field.
  std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x1a, 0x0d}) + "brain.Event:2";
  EXPECT_EQ(hex(encode_file_version_event(1.5)), hex(expected));
}

TEST(TfRecord, FrameMatchesHandComputedBytes) {
  // Length 26 as uint64 LE; the CRCs were computed with an independent bitwise CRC32C (poly
  // 0x82f63b78, reflected) and masked as ((c >> 15) | (c << 17)) + 0xa282ead8:
  //   crc32c(length bytes) = 0xd81d45aa -> masked 0x2dd89b12
  //   crc32c(event bytes)  = 0x92df4844 -> masked 0x330c1096
  std::string expected = bytes({26, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x9b, 0xd8, 0x2d}) + kLossEvent +
                         bytes({0x96, 0x10, 0x0c, 0x33});
  EXPECT_EQ(hex(tfrecord_frame(kLossEvent)), hex(expected));
}

TEST(TfRecord, ReadBackAndDetectCorruption) {
  testing::TempDir dir;
  auto path = dir.write("r.tfrecord", tfrecord_frame("first") + tfrecord_frame(kLossEvent));
  auto records = read_tfrecords(path);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], "first");
  EXPECT_EQ(records[1], kLossEvent);

  std::string corrupt = tfrecord_frame("first");
  corrupt[14] ^= 0x01;  // a data byte
  EXPECT_THROW(read_tfrecords(dir.write("bad.tfrecord", corrupt)), DataError);

  // A record cut short by a killed writer ends the list without error.
  std::string cut = tfrecord_frame("first") + tfrecord_frame("second").substr(0, 15);
  EXPECT_EQ(read_tfrecords(dir.write("cut.tfrecord", cut)).size(), 1u);
}

TEST(TensorBoardSink, WritesVersionThenScalarEvents) {
  testing::TempDir dir;
  std::filesystem::path file;
  {
    TensorBoardSink sink(dir / "tb");
    file = sink.path();
    StepMetrics m;
    m.step = 7;
    m.loss = 2.0;
    m.lr = 0.001;
    sink.on_step(m);
    EvalMetrics e;
    e.step = 7;
    e.val_loss = 2.5;
    sink.on_eval(e);
  }
  EXPECT_EQ(file.parent_path(), dir / "tb");
  EXPECT_EQ(file.filename().string().rfind("events.out.tfevents.", 0), 0u) << file;
  auto records = read_tfrecords(file);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  // The step event: step 7 (10 07), and the loss scalar exactly as the encoder writes it.
  EXPECT_NE(records[1].find(bytes({0x10, 0x07})), std::string::npos);
  std::string loss_value = bytes({0x0a, 0x0a}) + "train/loss" + bytes({0x15, 0, 0, 0, 0x40});
  EXPECT_NE(records[1].find(loss_value), std::string::npos) << hex(records[1]);
  EXPECT_NE(records[1].find("train/lr"), std::string::npos);
  EXPECT_EQ(records[1].find("train/grad_norm"), std::string::npos);  // unknown: not written
  EXPECT_NE(records[2].find("eval/val_loss"), std::string::npos);
}

TEST(TensorBoardSink, UnwritableDirectoryThrowsAtConstruction) {
  testing::TempDir dir;
  auto file = dir.write("not_a_dir", "x");  // a directory cannot be created under a file
  EXPECT_THROW(TensorBoardSink(file / "tb"), IoError);
}

}  // namespace
}  // namespace hwt
