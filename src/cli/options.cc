#include "cli/options.h"

#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <charconv>
#include <iostream>
#include <limits>
#include <type_traits>

#include "nest/core/unit_parse.h"

namespace nest::cli {
namespace {

namespace po = boost::program_options;

template <typename T>
struct IsOptional : std::false_type {
  using Value = T;
};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {
  using Value = T;
};

template <typename T>
T parse_number(const std::string& text, const std::string& option) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range) {
    throw Error::input("out of range",
                       {.key = option,
                        .value = text,
                        .expected = fmt::format("{} to {}", std::numeric_limits<T>::lowest(),
                                                std::numeric_limits<T>::max())});
  }
  if (ec != std::errc() || ptr != end || text.empty()) {
    throw Error::input(std::is_integral_v<T> ? "not an integer" : "not a number",
                       {.key = option,
                        .value = text,
                        .expected = std::is_integral_v<T> ? "an integer" : "a number"});
  }
  return v;
}

// Parses `text` as a T; errors carry the option's name.
template <typename T>
T convert(const std::string& text, const std::string& option) {
  if constexpr (std::is_same_v<T, std::string>) {
    return text;
  } else if constexpr (std::is_arithmetic_v<T>) {
    return parse_number<T>(text, option);
  } else {
    try {
      if constexpr (std::is_same_v<T, Bandwidth>) return parse_bandwidth(text);
      if constexpr (std::is_same_v<T, Time>) return parse_time(text);
      if constexpr (std::is_same_v<T, Bytes>) return parse_bytes(text);
    } catch (const Error& e) {
      throw Error::input(e.message(),
                         {.key = option, .value = text, .expected = e.context().expected});
    }
  }
}

template <typename T>
std::string default_text(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_arithmetic_v<T>) {
    return fmt::format("{}", v);
  } else if constexpr (std::is_same_v<T, Bandwidth>) {
    return format_bandwidth(v);
  } else if constexpr (std::is_same_v<T, Time>) {
    return format_time(v);
  } else {
    return format_bytes(v);
  }
}

struct Binding {
  std::string long_name;
  std::string field;
  bool flag = false;
  std::function<void(const std::string&, const std::string&)> set;  // (text, option) -> out
};

}  // namespace

struct Options::Impl {
  std::string usage;
  po::options_description described{"options"};
  po::positional_options_description positional;
  std::vector<Binding> bindings;
  std::vector<std::pair<std::string, std::string*>> positionals;
  std::vector<std::string> given;
  bool help = false;
};

Options::Options(std::string usage) : impl_(std::make_unique<Impl>()) {
  impl_->usage = std::move(usage);
  impl_->described.add_options()("help,h", po::bool_switch(&impl_->help), "show this help");
}

Options::~Options() = default;

template <typename T>
Options& Options::add(const char* name, T* out, const char* help, std::string field) {
  Binding b;
  b.long_name = std::string(name).substr(0, std::string(name).find(','));
  b.field = std::move(field);
  if constexpr (std::is_same_v<T, bool>) {
    b.flag = true;
    impl_->described.add_options()(name, po::bool_switch(out), help);
  } else {
    using Value = typename IsOptional<T>::Value;
    auto* value = po::value<std::string>();
    if constexpr (!IsOptional<T>::value) value->default_value(default_text<Value>(*out));
    impl_->described.add_options()(name, value, help);
    b.set = [out](const std::string& text, const std::string& option) {
      *out = convert<Value>(text, option);
    };
  }
  impl_->bindings.push_back(std::move(b));
  return *this;
}

template Options& Options::add(const char*, bool*, const char*, std::string);
template Options& Options::add(const char*, std::string*, const char*, std::string);
template Options& Options::add(const char*, std::optional<std::string>*, const char*, std::string);
template Options& Options::add(const char*, int*, const char*, std::string);
template Options& Options::add(const char*, std::optional<int>*, const char*, std::string);
template Options& Options::add(const char*, std::int64_t*, const char*, std::string);
template Options& Options::add(const char*, std::optional<std::int64_t>*, const char*, std::string);
template Options& Options::add(const char*, std::uint64_t*, const char*, std::string);
template Options& Options::add(const char*, std::optional<std::uint64_t>*, const char*,
                               std::string);
template Options& Options::add(const char*, double*, const char*, std::string);
template Options& Options::add(const char*, std::optional<double>*, const char*, std::string);
template Options& Options::add(const char*, Bandwidth*, const char*, std::string);
template Options& Options::add(const char*, std::optional<Bandwidth>*, const char*, std::string);
template Options& Options::add(const char*, Time*, const char*, std::string);
template Options& Options::add(const char*, std::optional<Time>*, const char*, std::string);
template Options& Options::add(const char*, Bytes*, const char*, std::string);
template Options& Options::add(const char*, std::optional<Bytes>*, const char*, std::string);

Options& Options::positional(const char* name, std::string* out, const char* help, bool required) {
  auto* value = po::value<std::string>();
  if (required) value->required();
  impl_->described.add_options()(name, value, help);
  impl_->positional.add(name, 1);
  impl_->positionals.emplace_back(name, out);
  return *this;
}

bool Options::parse(std::span<char* const> args) {
  Impl& m = *impl_;
  po::variables_map vm;
  try {
    // Boost skips argv[0], which is the command name here.
    po::store(po::command_line_parser(static_cast<int>(args.size()), args.data())
                  .options(m.described)
                  .positional(m.positional)
                  .run(),
              vm);
    if (vm.count("help") != 0 && vm["help"].as<bool>()) {
      std::cout << "usage: " << m.usage << "\n\n" << m.described << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw Error::input(e.what(), {.key = std::string(args[0]), .expected = "usage: " + m.usage});
  }
  for (const Binding& b : m.bindings) {
    const auto it = vm.find(b.long_name);
    if (it == vm.end() || it->second.empty()) continue;
    if (!it->second.defaulted()) m.given.push_back(b.long_name);
    if (!b.flag) b.set(it->second.as<std::string>(), "--" + b.long_name);
  }
  for (const auto& [name, out] : m.positionals) {
    const auto it = vm.find(name);
    if (it != vm.end() && !it->second.empty()) {
      *out = it->second.as<std::string>();
      m.given.push_back(name);
    }
  }
  return true;
}

bool Options::given(std::string_view name) const {
  for (const std::string& g : impl_->given) {
    if (g == name) return true;
  }
  return false;
}

Error Options::translate(const Error& e) const {
  const ErrorContext& c = e.context();
  if (!c.file.empty() || c.key.empty()) return e;
  for (const Binding& b : impl_->bindings) {
    if (b.field.empty() || b.field != c.key) continue;
    ErrorContext renamed = c;
    renamed.key = "--" + b.long_name;
    return Error(e.kind(), e.message(), renamed);
  }
  return e;
}

int Options::run(const std::function<int()>& body) const {
  try {
    return body();
  } catch (const Error& e) {
    throw translate(e);
  }
}

Catalog catalog() { return Catalog::standard(); }

std::string find_topology(const std::string& name, const std::string& key) {
  return catalog().find(DataKind::kTopology, name, key);
}

std::string command_line(std::span<char* const> args) {
  std::string s = "nest";
  for (char* a : args) s += std::string(" ") + a;
  return s;
}

void add_limit_options(Options& options, LimitArgs& args) {
  options
      .add("max-input-size", &args.max_input,
           "largest input file to read, e.g. 256MiB (default 64 MiB)", "max_input_bytes")
      .add("max-memory", &args.max_memory,
           "largest estimated memory of a topology, e.g. 64GiB (default: half the machine's)",
           "max_memory_bytes");
}

config::Limits limits_of(const LimitArgs& args) {
  config::Limits limits;
  const auto size = [](const char* option, const std::optional<Bytes>& given, std::int64_t& out) {
    if (!given) return;
    if (given->count() < 1) {
      throw Error::input(
          "must be positive",
          {.key = option, .value = format_bytes(*given), .expected = "a size > 0, e.g. 64GiB"});
    }
    out = given->count();
  };
  size("--max-input-size", args.max_input, limits.max_input_bytes);
  size("--max-memory", args.max_memory, limits.max_memory_bytes);
  return limits;
}

}  // namespace nest::cli
