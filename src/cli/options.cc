#include "cli/options.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "nest/core/error.h"
#include "nest/core/unit_parse.h"

namespace nest::cli {

namespace fs = std::filesystem;

std::vector<std::string> search_roots() {
  std::vector<std::string> roots;
  if (const char* home = std::getenv("NEST_HOME")) roots.emplace_back(home);
  roots.emplace_back(".");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    roots.push_back(exe.parent_path().parent_path().string());
    roots.push_back(exe.parent_path().parent_path().parent_path().string());
  }
  return roots;
}

std::string find_topology(const std::string& name) {
  std::error_code ec;  // a name too long for a path is no file, not an internal error
  if (fs::exists(name, ec)) return name;
  for (const auto& root : search_roots()) {
    const fs::path p = fs::path(root) / "topologies" / (name + ".yaml");
    if (fs::exists(p, ec)) return p.string();
  }
  throw Error::input(
      "no such topology file or name",
      {.key = "--topology", .value = name, .expected = "a file or a name of topologies/"});
}

void add_limit_options(po::options_description& options) {
  options.add_options()("max-input-size", po::value<std::string>(),
                        "largest input file to read, e.g. 256MiB (default 64 MiB)")(
      "max-memory", po::value<std::string>(),
      "largest estimated memory of a topology, e.g. 64GiB (default: half the machine's)");
}

config::Limits limits_of(const po::variables_map& vm) {
  config::Limits limits;
  const auto size = [&](const char* option, std::int64_t& out) {
    if (vm.count(option) == 0) return;
    try {
      out = parse_bytes(vm[option].as<std::string>()).count();
    } catch (const Error& e) {
      throw e.at_key(std::string("--") + option);
    }
    if (out < 1) {
      throw Error::input("must be positive", {.key = std::string("--") + option,
                                              .value = vm[option].as<std::string>(),
                                              .expected = "a size > 0, e.g. 64GiB"});
    }
  };
  size("max-input-size", limits.max_input_bytes);
  size("max-memory", limits.max_memory_bytes);
  return limits;
}

bool parse_options(std::span<char* const> args, const std::string& usage,
                   po::options_description& options,
                   const po::positional_options_description& positional, po::variables_map& vm) {
  options.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(static_cast<int>(args.size()), args.data())
                  .options(options)
                  .positional(positional)
                  .run(),
              vm);
    if (vm.count("help") != 0) {
      std::cout << "usage: " << usage << "\n\n" << options << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw Error::input(e.what(), {.key = std::string(args[0]), .expected = "usage: " + usage});
  }
  return true;
}

}  // namespace nest::cli
