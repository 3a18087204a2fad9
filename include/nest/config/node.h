#pragma once
/// \file
/// Strict YAML reading. A `config::Node` is a YAML node that knows its file, line and path from
/// the document root, so that every error it raises names all three:
/// `topologies/x.yaml:12: links[3].bandwidth: missing unit (got "400"; expected a bandwidth ...)`.
/// yaml-cpp stays behind this header (pimpl), so including it is cheap.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nest/config/limits.h"
#include "nest/core/error.h"
#include "nest/core/units.h"

namespace nest::config {

/// A node of a loaded YAML document. Cheap to copy (shares the document).
class Node {
 public:
  /// Loads and parses `path` (read by `read_input_file` of nest/config/limits.h: a regular file
  /// of at most `max_bytes`). Throws `Error` (input) when unreadable or malformed, with the line.
  [[nodiscard]] static Node load_file(const std::string& path,
                                      std::int64_t max_bytes = kDefaultMaxInputBytes);
  /// Parses `text`; `name` stands for the file name in errors. Strict beyond YAML: the text
  /// must be UTF-8 and one document, map keys scalars and unique, nesting at most
  /// kMaxYamlDepth (32) levels, and aliases may not expand the tree past one node per byte.
  /// Each violation is an input error naming the line.
  [[nodiscard]] static Node load_string(std::string_view text, std::string name);

  Node(const Node&);
  Node& operator=(const Node&);
  Node(Node&&) noexcept;
  Node& operator=(Node&&) noexcept;
  ~Node();

  [[nodiscard]] bool is_map() const;
  [[nodiscard]] bool is_sequence() const;
  [[nodiscard]] bool is_scalar() const;
  [[nodiscard]] bool is_null() const;

  /// Throws unless this node is a map whose keys are all in `allowed` (the error names the
  /// unknown key, its line and the accepted keys).
  void expect_keys(std::initializer_list<std::string_view> allowed) const;
  /// Like `expect_keys` with a runtime list.
  void expect_keys(const std::vector<std::string>& allowed) const;

  /// The value of a required key of a map; throws naming the missing key.
  [[nodiscard]] Node at(std::string_view key) const;
  /// The value of an optional key, or nothing when absent (or null).
  [[nodiscard]] std::optional<Node> find(std::string_view key) const;
  [[nodiscard]] bool has(std::string_view key) const;

  /// Elements of a sequence (throws if this is not a sequence).
  [[nodiscard]] std::vector<Node> elements() const;
  /// Key/value pairs of a map in document order (throws if this is not a map).
  [[nodiscard]] std::vector<std::pair<std::string, Node>> entries() const;

  /// Scalars. Each throws an input error naming the node when the text does not fit.
  [[nodiscard]] std::string as_string() const;
  [[nodiscard]] bool as_bool() const;
  /// An integer in [min, max].
  [[nodiscard]] std::int64_t as_int(std::int64_t min = INT64_MIN,
                                    std::int64_t max = INT64_MAX) const;
  /// A finite number in [min, max].
  [[nodiscard]] double as_double(double min = -1e308, double max = 1e308) const;
  /// Quantities with units, via the parsers of nest/core/unit_parse.h. Strictly positive unless
  /// `allow_zero`.
  [[nodiscard]] Time as_time(bool allow_zero = false) const;
  [[nodiscard]] Bytes as_bytes(bool allow_zero = false) const;
  [[nodiscard]] Bandwidth as_bandwidth() const;
  [[nodiscard]] FlopRate as_flop_rate() const;
  /// One of `choices`; the error lists them.
  [[nodiscard]] std::string as_choice(std::initializer_list<std::string_view> choices) const;
  /// A sequence of integers, each in [min, max].
  [[nodiscard]] std::vector<std::int64_t> as_int_list(std::int64_t min = INT64_MIN,
                                                      std::int64_t max = INT64_MAX) const;

  /// An input error located at this node.
  [[nodiscard]] Error error(const std::string& message, const std::string& expected = {}) const;

  [[nodiscard]] const std::string& file() const;
  /// 1-based line of the node in its file (0 when unknown).
  [[nodiscard]] int line() const;
  /// Path from the document root, e.g. `links[3].bandwidth`; empty for the root.
  [[nodiscard]] const std::string& path() const;
  /// The scalar text (empty for maps and sequences), for messages.
  [[nodiscard]] std::string text() const;

 private:
  struct Impl;
  explicit Node(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nest::config
