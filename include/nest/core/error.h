#pragma once
/// \file
/// `nest::Error`: the one exception type of the library. It carries where the problem is (file,
/// line, YAML path or option name), the offending value and what was expected, and renders all
/// of it as one line. Library code throws it; only `main` prints it and picks the exit status.

#include <stdexcept>
#include <string>

namespace nest {

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
/// `file:line: key: message (got "value"; expected ...)`.
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
