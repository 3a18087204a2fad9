#include "nest/core/error.h"

#include <utility>

namespace nest {
namespace {

std::string render(const std::string& message, const ErrorContext& c) {
  std::string out;
  if (!c.file.empty()) {
    out += c.file;
    if (c.line > 0) out += ":" + std::to_string(c.line);
    out += ": ";
  }
  if (!c.key.empty()) out += c.key + ": ";
  out += message;
  if (!c.value.empty() || !c.expected.empty()) {
    out += " (";
    if (!c.value.empty()) out += "got \"" + c.value + "\"";
    if (!c.value.empty() && !c.expected.empty()) out += "; ";
    if (!c.expected.empty()) out += "expected " + c.expected;
    out += ")";
  }
  // One line, whatever the pieces held.
  for (char& ch : out) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  return out;
}

}  // namespace

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
