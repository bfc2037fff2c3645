#include "hwtrain/data/byte_tokenizer.h"

namespace hwt {

void ByteTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  size_t start = out.size();
  out.resize(start + text.size());
  const auto* src = reinterpret_cast<const unsigned char*>(text.data());
  int32_t* dst = out.data() + start;
  for (size_t i = 0; i < text.size(); ++i) dst[i] = src[i];
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < 256) {
      text.push_back(static_cast<char>(id));
    } else if (id == kEotId) {
      text.push_back('\n');
    } else {
      text += "\xEF\xBF\xBD";  // U+FFFD
    }
  }
  return text;
}

}  // namespace hwt
