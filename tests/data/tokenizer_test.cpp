#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/data/byte_tokenizer.h"
#include "hwtrain/data/tokenizer.h"

namespace hwt {
namespace {

TEST(ByteTokenizer, RoundTripsAscii) {
  auto tok = make_tokenizer("byte");
  std::string text = "Hello, world!\nA second line.\t";
  std::vector<int32_t> ids = tok->encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[0], 'H');
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(ByteTokenizer, RoundTripsUtf8AsBytes) {
  auto tok = make_tokenizer("byte");
  std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";  // café € 😀
  std::vector<int32_t> ids = tok->encode(text);
  EXPECT_EQ(ids.size(), text.size());  // one id per byte, not per character
  EXPECT_EQ(ids[3], 0xC3);
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(ByteTokenizer, KeepsInvalidUtf8AndAllBytes) {
  auto tok = make_tokenizer("byte");
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>(b));
  text += "\xC3\x28\xFF\xFE";  // invalid sequences
  std::vector<int32_t> ids = tok->encode(text);
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 256);
  }
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(ByteTokenizer, EndOfTextAndVocabulary) {
  auto tok = make_tokenizer("byte");
  EXPECT_EQ(tok->vocab_size(), 257);
  EXPECT_EQ(tok->eot_id(), 256);
  EXPECT_EQ(tok->name(), "byte");
  EXPECT_TRUE(tok->is_byte_level());
  EXPECT_EQ(tok->decode({'a', 256, 'b'}), "a\nb");
  EXPECT_EQ(tok->decode({'a', 300, -1}), "a\xEF\xBF\xBD\xEF\xBF\xBD");  // padded-vocab ids
  std::vector<int32_t> ids = {7};
  tok->encode_append("xy", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 'x', 'y'}));
}

TEST(MakeTokenizer, UnknownSpecNamesTheKey) {
  try {
    make_tokenizer("bytes");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("data.tokenizer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'byte'"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace hwt
