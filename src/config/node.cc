#include "nest/config/node.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <string_view>
#include <unordered_set>

#include "nest/config/limits.h"
#include "nest/core/unit_parse.h"

namespace nest::config {

struct Node::Impl {
  YAML::Node node;
  std::shared_ptr<const std::string> file;
  std::string path;
};

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

int line_of(const YAML::Mark& m) { return m.is_null() ? 0 : m.line + 1; }

Error parse_error(const YAML::Exception& e, const std::string& file) {
  return Error::input(fmt::format("malformed YAML: {}", e.msg),
                      {.file = file, .line = line_of(e.mark)});
}

Error too_deep(const std::string& file, int line) {
  return Error::input(
      "nesting too deep",
      {.file = file,
       .line = line,
       .expected = fmt::format("at most {} levels of maps and lists", kMaxYamlDepth)});
}

// 1-based line of byte `offset` of `text`.
int line_at(std::string_view text, std::size_t offset) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + offset, '\n'));
}

// Offset of the first C0 control character other than tab and line breaks, DEL or C1 control
// (YAML 1.2's c-printable excludes them; U+0085 is a line break), or text.size().
std::size_t control_character(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    if ((b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7F) return i;
    if (b == 0xC2 && i + 1 < text.size()) {
      const auto c = static_cast<unsigned char>(text[i + 1]);
      if (c >= 0x80 && c <= 0x9F && c != 0x85) return i;
    }
  }
  return text.size();
}

// Parse events only: counts documents and remembers where the second starts.
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents_ == 1) second_ = mark;
    if (documents_ == 2) third_ = mark;
    ++documents_;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  [[nodiscard]] const YAML::Mark& second() const { return second_; }
  [[nodiscard]] const YAML::Mark& third() const { return third_; }

 private:
  int documents_ = 0;
  YAML::Mark second_ = YAML::Mark::null_mark();
  YAML::Mark third_ = YAML::Mark::null_mark();
};

// Throws when the text holds a second document. yaml-cpp's LoadAll never returns on some
// malformed texts (a lone ",": every call yields another empty document at the same place,
// found by tests/fuzz/), so the parser is asked for three documents at most, and a third that
// starts where the second did marks such a text.
void check_one_document(std::string_view text, const std::string& file) {
  std::istringstream in{std::string(text)};
  YAML::Parser parser(in);
  DocumentCounter counter;
  if (!parser.HandleNextDocument(counter)) return;
  if (parser.HandleNextDocument(counter)) {
    if (parser.HandleNextDocument(counter) && counter.third().pos == counter.second().pos) {
      throw Error::input("malformed YAML: unexpected text",
                         {.file = file, .line = line_of(counter.second())});
    }
    throw Error::input(
        "a second YAML document",
        {.file = file, .line = line_of(counter.second()), .expected = "one document per file"});
  }
}

// What YAML allows and NEST's formats need checked over the whole tree, once, at load: map keys
// are scalars and unique (yaml-cpp keeps both of two equal keys and a lookup finds the first),
// nesting is at most kMaxYamlDepth deep, and aliases do not expand the tree past one node per
// byte of the file (a document without aliases cannot have more; a "billion laughs" file does).
class TreeCheck {
 public:
  TreeCheck(const std::string& file, std::size_t text_bytes)
      : file_(file), budget_(text_bytes + 16) {}

  void walk(const YAML::Node& node, int depth, const std::string& path) {
    if (++visited_ > budget_) {
      throw Error::input(
          "aliases expand to too many nodes",
          {.file = file_,
           .line = line_of(node.Mark()),
           .key = path.empty() ? "(document)" : path,
           .expected = fmt::format("at most {} nodes (one per byte of the file)", budget_)});
    }
    if (node.IsMap() || node.IsSequence()) {
      if (depth >= kMaxYamlDepth) throw too_deep(file_, line_of(node.Mark()));
    }
    if (node.IsSequence()) {
      std::size_t i = 0;
      for (const auto& element : node) walk(element, depth + 1, fmt::format("{}[{}]", path, i++));
      return;
    }
    if (!node.IsMap()) return;
    std::unordered_set<std::string> keys;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        throw Error::input("a map key must be a scalar", {.file = file_,
                                                          .line = line_of(kv.first.Mark()),
                                                          .key = path.empty() ? "(document)" : path,
                                                          .expected = "a name"});
      }
      const std::string& key = kv.first.Scalar();
      const std::string child = child_path(path, key);
      if (!keys.insert(key).second) {
        throw Error::input(fmt::format("duplicate key \"{}\"", printable(key, kValueExcerpt)),
                           {.file = file_,
                            .line = line_of(kv.first.Mark()),
                            .key = child,
                            .expected = "each key once in a map"});
      }
      walk(kv.second, depth + 1, child);
    }
  }

 private:
  const std::string& file_;
  std::size_t budget_;
  std::size_t visited_ = 0;
};

}  // namespace

Node::Node(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Node::Node(const Node& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
Node& Node::operator=(const Node& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
Node::Node(Node&&) noexcept = default;
Node& Node::operator=(Node&&) noexcept = default;
Node::~Node() = default;

Node Node::load_file(const std::string& path, std::int64_t max_bytes) {
  return load_string(read_input_file(path, max_bytes), path);
}

Node Node::load_string(std::string_view text, std::string name) {
  auto file = std::make_shared<const std::string>(std::move(name));
  const std::size_t valid = utf8_prefix(text);
  if (valid != text.size()) {
    throw Error::input(
        "not UTF-8 text",
        {.file = *file,
         .line = line_at(text, valid),
         .value = fmt::format("byte 0x{:02x}", static_cast<unsigned char>(text[valid])),
         .expected = "a YAML file in UTF-8"});
  }
  if (const std::size_t bad = control_character(text); bad != text.size()) {
    throw Error::input(
        "control character in the text",
        {.file = *file,
         .line = line_at(text, bad),
         .value = fmt::format("byte 0x{:02x}", static_cast<unsigned char>(text[bad])),
         .expected = "YAML text: no control characters but tab and line breaks"});
  }
  YAML::Node root;
  try {
    check_one_document(text, *file);
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    throw too_deep(*file, line_of(e.mark));
  } catch (const YAML::Exception& e) {
    throw parse_error(e, *file);
  }
  if (!root.IsDefined() || root.IsNull()) {
    throw Error::input("empty document", {.file = *file, .expected = "a YAML map"});
  }
  TreeCheck(*file, text.size()).walk(root, 0, "");
  return Node(std::make_unique<Impl>(Impl{root, file, ""}));
}

bool Node::is_map() const { return impl_->node.IsMap(); }
bool Node::is_sequence() const { return impl_->node.IsSequence(); }
bool Node::is_scalar() const { return impl_->node.IsScalar(); }
bool Node::is_null() const { return impl_->node.IsNull(); }

const std::string& Node::file() const { return *impl_->file; }
int Node::line() const {
  const YAML::Mark m = impl_->node.Mark();
  return m.is_null() ? 0 : m.line + 1;
}
const std::string& Node::path() const { return impl_->path; }
std::string Node::text() const { return impl_->node.IsScalar() ? impl_->node.Scalar() : ""; }

Error Node::error(const std::string& message, const std::string& expected) const {
  // A document that is one scalar is the file's whole text: never echo it (a path given where
  // a NEST file was expected, e.g. /etc/passwd, must not be printed).
  return Error::input(message, {.file = file(),
                                .line = line(),
                                .key = path().empty() ? "(document)" : path(),
                                .value = path().empty() ? std::string() : text(),
                                .expected = expected});
}

void Node::expect_keys(std::initializer_list<std::string_view> allowed) const {
  expect_keys(std::vector<std::string>(allowed.begin(), allowed.end()));
}

void Node::expect_keys(const std::vector<std::string>& allowed) const {
  if (!is_map()) throw error("expected a map", "a map with keys " + join(allowed));
  for (const auto& kv : impl_->node) {
    const std::string key = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    const YAML::Mark m = kv.first.Mark();
    throw Error::input(fmt::format("unknown key \"{}\"", printable(key, kValueExcerpt)),
                       {.file = file(),
                        .line = m.is_null() ? line() : m.line + 1,
                        .key = child_path(path(), key),
                        .expected = "one of " + join(allowed)});
  }
}

std::optional<Node> Node::find(std::string_view key) const {
  if (!is_map()) throw error("expected a map");
  for (const auto& kv : impl_->node) {
    if (kv.first.Scalar() != key) continue;
    if (kv.second.IsNull()) return std::nullopt;
    return Node(std::make_unique<Impl>(Impl{kv.second, impl_->file, child_path(path(), key)}));
  }
  return std::nullopt;
}

bool Node::has(std::string_view key) const { return find(key).has_value(); }

Node Node::at(std::string_view key) const {
  if (auto child = find(key)) return *std::move(child);
  throw Error::input(
      fmt::format("missing required key \"{}\"", key),
      {.file = file(), .line = line(), .key = path().empty() ? "(document)" : path()});
}

std::vector<Node> Node::elements() const {
  if (!is_sequence()) throw error("expected a sequence", "a YAML list");
  std::vector<Node> out;
  out.reserve(impl_->node.size());
  std::size_t i = 0;
  for (const auto& element : impl_->node) {
    out.push_back(Node(
        std::make_unique<Impl>(Impl{element, impl_->file, fmt::format("{}[{}]", path(), i++)})));
  }
  return out;
}

std::vector<std::pair<std::string, Node>> Node::entries() const {
  if (!is_map()) throw error("expected a map");
  std::vector<std::pair<std::string, Node>> out;
  for (const auto& kv : impl_->node) {
    const std::string key = kv.first.Scalar();
    out.emplace_back(
        key, Node(std::make_unique<Impl>(Impl{kv.second, impl_->file, child_path(path(), key)})));
  }
  return out;
}

std::string Node::as_string() const {
  if (!is_scalar()) throw error("expected a scalar", "a string");
  return impl_->node.Scalar();
}

bool Node::as_bool() const {
  const std::string s = is_scalar() ? impl_->node.Scalar() : "";
  if (s == "true") return true;
  if (s == "false") return false;
  throw error("not a boolean", "true or false");
}

std::int64_t Node::as_int(std::int64_t min, std::int64_t max) const {
  const std::string expected = fmt::format("an integer in [{}, {}]", min, max);
  if (!is_scalar()) throw error("expected an integer", expected);
  const std::string& s = impl_->node.Scalar();
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used, 10);
  } catch (const std::exception&) {
    throw error("not an integer", expected);
  }
  if (used != s.size()) throw error("not an integer", expected);
  if (v < min || v > max) throw error("out of range", expected);
  return v;
}

double Node::as_double(double min, double max) const {
  const std::string expected = fmt::format("a number in [{}, {}]", min, max);
  if (!is_scalar()) throw error("expected a number", expected);
  const std::string& s = impl_->node.Scalar();
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    throw error("not a number", expected);
  }
  if (used != s.size() || !std::isfinite(v)) throw error("not a number", expected);
  if (v < min || v > max) throw error("out of range", expected);
  return v;
}

namespace {

template <class F>
auto parse_at(const Node& node, F&& parse) {
  if (!node.is_scalar()) throw node.error("expected a quantity with a unit");
  try {
    return parse(node.as_string());
  } catch (const Error& e) {
    throw node.error(e.message(), e.context().expected);
  }
}

}  // namespace

Time Node::as_time(bool allow_zero) const {
  const Time t = parse_at(*this, [](const std::string& s) { return parse_time(s); });
  if (!allow_zero && t <= Time::zero()) throw error("must be positive", "a duration > 0");
  return t;
}

Bytes Node::as_bytes(bool allow_zero) const {
  const Bytes b = parse_at(*this, [](const std::string& s) { return parse_bytes(s); });
  if (!allow_zero && b <= Bytes(0)) throw error("must be positive", "a size > 0");
  return b;
}

Bandwidth Node::as_bandwidth() const {
  const Bandwidth b = parse_at(*this, [](const std::string& s) { return parse_bandwidth(s); });
  if (b.bytes_per_s() <= 0) throw error("must be positive", "a bandwidth > 0");
  return b;
}

FlopRate Node::as_flop_rate() const {
  const FlopRate f = parse_at(*this, [](const std::string& s) { return parse_flop_rate(s); });
  if (f.flops_per_s() <= 0) throw error("must be positive", "a compute rate > 0");
  return f;
}

std::string Node::as_choice(std::initializer_list<std::string_view> choices) const {
  std::vector<std::string> names(choices.begin(), choices.end());
  const std::string s = is_scalar() ? impl_->node.Scalar() : "";
  if (std::find(names.begin(), names.end(), s) == names.end()) {
    throw error("unknown value", "one of " + join(names));
  }
  return s;
}

std::vector<std::int64_t> Node::as_int_list(std::int64_t min, std::int64_t max) const {
  std::vector<std::int64_t> out;
  for (const Node& e : elements()) out.push_back(e.as_int(min, max));
  return out;
}

}  // namespace nest::config
