#include "nest/core/output_paths.h"

#include <sys/stat.h>

#include "nest/core/error.h"

namespace nest {

bool same_path(const std::filesystem::path& a, const std::filesystem::path& b) {
  struct stat sa = {};
  struct stat sb = {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  std::error_code ec_a;
  std::error_code ec_b;
  const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a), ec_a);
  const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b), ec_b);
  if (ec_a || ec_b) return a.lexically_normal() == b.lexically_normal();
  return ca == cb;
}

void check_outputs(std::span<const NamedPath> outputs, std::span<const NamedPath> inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    if (out.path.empty()) continue;
    for (std::size_t j = 0; j < i; ++j) {
      if (outputs[j].path.empty() || !same_path(out.path, outputs[j].path)) continue;
      throw Error::input("the same file as " + outputs[j].key,
                         {.key = out.key,
                          .value = out.path.string(),
                          .expected = "a file of its own for each output"});
    }
    for (const NamedPath& in : inputs) {
      if (in.path.empty() || !same_path(out.path, in.path)) continue;
      throw Error::input(
          "the output would replace the input " + in.key,
          {.key = out.key, .value = out.path.string(), .expected = "a file that is not an input"});
    }
  }
}

}  // namespace nest
