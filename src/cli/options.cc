#include "cli/options.h"

#include <fmt/format.h>

#include <iostream>

#include "nest/core/error.h"

namespace nest::cli {

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
