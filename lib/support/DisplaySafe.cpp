// Model-supplied text (node, value, op and file names) reaches terminals and
// logs through error messages and reports. A malformed or hostile model
// must not be able to put terminal control sequences, invalid UTF-8 or
// bidirectional-override characters ("Trojan source") there, nor flood a
// terminal with a megabyte-long name.
#include "kiln/Support/DisplaySafe.h"

#include <cstdio>

namespace kiln {

namespace {

void hexEscape(std::string &out, unsigned char c) {
  static const char digits[] = "0123456789abcdef";
  out += "\\x";
  out += digits[c >> 4];
  out += digits[c & 15];
}

/// Length of the valid UTF-8 sequence at s[i] and its code point, or 0.
size_t utf8Sequence(std::string_view s, size_t i, uint32_t &cp) {
  unsigned char c = s[i];
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (!len || i + len > s.size())
    return 0;
  cp = len == 1 ? c : c & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    unsigned char d = s[i + k];
    if ((d >> 6) != 2)
      return 0;
    cp = (cp << 6) | (d & 0x3f);
  }
  static const uint32_t minimum[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < minimum[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0; // overlong, out of range or a surrogate
  return len;
}

bool unsafeCodePoint(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) ||     // C1 controls (CSI is 0x9b)
         (cp >= 0x202a && cp <= 0x202e) || // bidirectional embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069) || // bidirectional isolates
         cp == 0x2028 || cp == 0x2029 || cp == 0xfeff;
}

} // namespace

std::string displaySafe(std::string_view text, size_t maxBytes) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  for (; i < text.size(); ) {
    if (maxBytes && out.size() >= maxBytes)
      break;
    unsigned char c = text[i];
    if (c == '\n' || c == '\t') {
      out += (char)c;
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7f) {
      hexEscape(out, c);
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len = utf8Sequence(text, i, cp);
    if (!len) {
      hexEscape(out, c);
      ++i;
      continue;
    }
    if (unsafeCodePoint(cp)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\u{%x}", (unsigned)cp);
      out += buf;
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  if (i < text.size())
    out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

} // namespace kiln
