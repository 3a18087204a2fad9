#include "nest/config/node.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>

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

Error parse_error(const YAML::Exception& e, const std::string& file) {
  return Error::input(fmt::format("malformed YAML: {}", e.msg),
                      {.file = file, .line = e.mark.is_null() ? 0 : e.mark.line + 1});
}

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

Node Node::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error::input("cannot open file", {.file = path, .expected = "a readable YAML file"});
  std::stringstream buffer;
  buffer << in.rdbuf();
  return load_string(buffer.str(), path);
}

Node Node::load_string(std::string_view text, std::string name) {
  auto file = std::make_shared<const std::string>(std::move(name));
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsDefined() || root.IsNull()) {
      throw Error::input("empty document", {.file = *file, .expected = "a YAML map"});
    }
    return Node(std::make_unique<Impl>(Impl{root, file, ""}));
  } catch (const YAML::Exception& e) {
    throw parse_error(e, *file);
  }
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
  return Error::input(message, {.file = file(),
                                .line = line(),
                                .key = path().empty() ? "(document)" : path(),
                                .value = text(),
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
    throw Error::input(fmt::format("unknown key \"{}\"", key),
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
