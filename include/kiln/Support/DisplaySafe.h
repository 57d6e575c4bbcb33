// Printing text that came from a model (names of nodes, values, files).
#ifndef KILN_SUPPORT_DISPLAYSAFE_H
#define KILN_SUPPORT_DISPLAYSAFE_H

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

/// `text` made safe to print: control characters other than newline and tab,
/// bytes that are not valid UTF-8, C1 controls and bidirectional overrides
/// become escapes (\x1b, \u{202e}); with maxBytes > 0, text past that many
/// output bytes is cut and its length noted. Every Status message goes
/// through it, since messages quote names taken from the model.
std::string displaySafe(std::string_view text, size_t maxBytes = 0);

} // namespace kiln

#endif
