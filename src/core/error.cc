#include "nest/core/error.h"

#include <fmt/format.h>

#include <utility>

namespace nest {
namespace {

// Length of the well-formed UTF-8 sequence that starts `text`, or 0 when it does not start one
// (RFC 3629 table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF).
std::size_t sequence_length(std::string_view text) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const auto in = [&](std::size_t i, unsigned lo, unsigned hi) {
    return i < text.size() && byte(i) >= lo && byte(i) <= hi;
  };
  const unsigned b0 = byte(0);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80;
    const unsigned hi = b0 == 0xED ? 0x9F : 0xBF;
    return in(1, lo, hi) && in(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80;
    const unsigned hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return in(1, lo, hi) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

std::size_t code_points(std::string_view text) noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size(); ++n) {
    const std::size_t len = sequence_length(text.substr(i));
    i += len == 0 ? 1 : len;
  }
  return n;
}

// The last `max_chars` code points of `text`, after "...", when it is longer: a file name's
// end says most.
std::string printable_tail(std::string_view text, std::size_t max_chars) {
  const std::size_t n = code_points(text);
  if (n <= max_chars) return printable(text);
  std::size_t skip = n - max_chars;
  std::size_t i = 0;
  while (skip > 0 && i < text.size()) {
    const std::size_t len = sequence_length(text.substr(i));
    i += len == 0 ? 1 : len;
    --skip;
  }
  return "..." + printable(text.substr(i));
}

std::string shown_value(const std::string& value) {
  if (code_points(value) <= kValueExcerpt) return "\"" + printable(value) + "\"";
  return fmt::format("{} bytes beginning \"{}\"", value.size(), printable(value, kValueExcerpt));
}

// Cuts `line` to kMaxLine bytes on a character boundary (it is printable, so valid UTF-8).
std::string capped(std::string line) {
  if (line.size() <= kMaxLine) return line;
  std::size_t cut = kMaxLine - 3;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  line.resize(cut);
  return line + "...";
}

std::string render(const std::string& message, const ErrorContext& c) {
  std::string out;
  if (!c.file.empty()) {
    out += printable_tail(c.file, kNameExcerpt);
    if (c.line > 0) out += ":" + std::to_string(c.line);
    out += ": ";
  }
  if (!c.key.empty()) out += printable(c.key, kNameExcerpt) + ": ";
  out += printable(message, kMaxLine);
  if (!c.value.empty() || !c.expected.empty()) {
    out += " (";
    if (!c.value.empty()) out += "got " + shown_value(c.value);
    if (!c.value.empty() && !c.expected.empty()) out += "; ";
    if (!c.expected.empty()) out += "expected " + printable(c.expected, kMaxLine);
    out += ")";
  }
  return capped(std::move(out));
}

}  // namespace

std::size_t utf8_prefix(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t len = sequence_length(text.substr(i));
    if (len == 0) return i;
    i += len;
  }
  return i;
}

bool is_utf8(std::string_view text) noexcept { return utf8_prefix(text) == text.size(); }

std::string printable(std::string_view text, std::size_t max_chars) {
  std::string out;
  std::size_t chars = 0;
  for (std::size_t i = 0; i < text.size(); ++chars) {
    if (chars == max_chars) return out + "...";
    const std::size_t len = sequence_length(text.substr(i));
    const auto b = static_cast<unsigned char>(text[i]);
    if (len == 0) {
      out += fmt::format("\\x{:02x}", b);
      ++i;
      continue;
    }
    if (len == 1 && (b < 0x20 || b == 0x7F)) {
      if (b == '\n') {
        out += "\\n";
      } else if (b == '\t') {
        out += "\\t";
      } else if (b == '\r') {
        out += "\\r";
      } else {
        out += fmt::format("\\x{:02x}", b);
      }
    } else if (len == 2 && b == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      // C1 controls (U+0080..U+009F): some terminals act on them (U+009B is CSI).
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[i + 1]));
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

Error::Error(ErrorKind kind, const std::string& message, ErrorContext context)
    : std::runtime_error(render(message, context)),
      kind_(kind),
      message_(message),
      context_(std::move(context)) {}

Error Error::input(const std::string& message, ErrorContext context) {
  return Error(ErrorKind::kInput, message, std::move(context));
}

Error Error::internal(const std::string& message) {
  return Error(ErrorKind::kInternal, "internal error: " + message);
}

Error Error::in_file(const std::string& file, int line) const {
  ErrorContext c = context_;
  if (c.file.empty()) c.file = file;
  if (c.line == 0) c.line = line;
  return Error(kind_, message_, std::move(c));
}

Error Error::at_key(const std::string& key) const {
  ErrorContext c = context_;
  if (c.key.empty()) {
    c.key = key;
  } else {
    c.key = key + (c.key.front() == '[' ? "" : ".") + c.key;
  }
  return Error(kind_, message_, std::move(c));
}

}  // namespace nest
