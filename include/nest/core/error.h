#pragma once
/// \file
/// `nest::Error`: the one exception type of the library. It carries where the problem is (file,
/// line, YAML path or option name), the offending value and what was expected, and renders all
/// of it as one line. Library code throws it; only `main` prints it and picks the exit status.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace nest {

/// Characters of a value that an error shows.
inline constexpr std::size_t kValueExcerpt = 256;
/// Characters of a key or file name that an error shows.
inline constexpr std::size_t kNameExcerpt = 256;
/// Bytes of a whole error line, at most.
inline constexpr std::size_t kMaxLine = 2048;

/// `text` made safe for a one-line message: C0 and C1 control characters and DEL as escapes
/// (`\n`, `\t`, `\r`, `\x1b`, `\u009b`), bytes that are not UTF-8 as `\xff`, and at most
/// `max_chars` characters (code points) of it, followed by "..." when cut. O(length).
[[nodiscard]] std::string printable(std::string_view text, std::size_t max_chars = SIZE_MAX);

/// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
/// U+10FFFF). O(length).
[[nodiscard]] bool is_utf8(std::string_view text) noexcept;

/// Offset of the first byte of `text` that does not start or continue a well-formed UTF-8
/// sequence, or `text.size()` when it is all UTF-8.
[[nodiscard]] std::size_t utf8_prefix(std::string_view text) noexcept;

/// Who is at fault: the user's input (exit status 2) or NEST itself (exit status 1).
enum class ErrorKind { kInput, kInternal };

/// Where an input error is. Every field is optional; empty fields are left out of the message.
struct ErrorContext {
  std::string file;      ///< input file, as the user named it
  int line = 0;          ///< 1-based line in `file`, 0 when unknown
  std::string key;       ///< YAML path ("links[3].bandwidth") or option name ("--group")
  std::string value;     ///< the offending text, quoted in the message
  std::string expected;  ///< what would have been accepted
};

/// Exception with context. `what()` is one line:
/// `file:line: key: message (got "value"; expected ...)`. Every piece is shown through
/// `printable`, so no input can put a control character, an escape sequence or invalid UTF-8
/// on the terminal; a value longer than `kValueExcerpt` characters is cut to its beginning and
/// its length (`got 10485760 bytes beginning "aaaa..."`), the key and file to `kNameExcerpt`
/// characters (a file keeps its end), and the whole line to `kMaxLine` bytes.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, ErrorContext context = {});

  /// An input error (exit status 2).
  [[nodiscard]] static Error input(const std::string& message, ErrorContext context = {});
  /// An internal error: a broken invariant of NEST itself (exit status 1).
  [[nodiscard]] static Error internal(const std::string& message);

  [[nodiscard]] ErrorKind kind() const noexcept { return kind_; }
  [[nodiscard]] const ErrorContext& context() const noexcept { return context_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// 2 for input errors, 1 for internal ones.
  [[nodiscard]] int exit_status() const noexcept { return kind_ == ErrorKind::kInput ? 2 : 1; }

  /// The same error with `file` (and `line`, when known) filled in where they were empty: lets
  /// a loader add the file name to errors thrown by code that only saw a string.
  [[nodiscard]] Error in_file(const std::string& file, int line = 0) const;
  /// The same error with `key` prefixed (`prefix.key`), or set when empty.
  [[nodiscard]] Error at_key(const std::string& key) const;

 private:
  ErrorKind kind_;
  std::string message_;
  ErrorContext context_;
};

}  // namespace nest
