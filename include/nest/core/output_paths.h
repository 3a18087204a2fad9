#pragma once
/// \file
/// Outputs that would destroy an input or each other are refused before any work:
/// `nest simulate --plan plan.yaml -o plan.yaml` would replace the plan it reads, and
/// `-o x --trace x` would write two files under one name.

#include <filesystem>
#include <span>
#include <string>

namespace nest {

/// A file named by an option.
struct NamedPath {
  std::string key;             ///< the option or plan key ("--trace", "inputs.topology")
  std::filesystem::path path;  ///< as given
};

/// Whether `a` and `b` are one file: the same inode when both exist (hard links, symlinks and
/// different spellings of one path included), else the same absolute, normalized path with
/// symlinks of the existing part resolved.
[[nodiscard]] bool same_path(const std::filesystem::path& a, const std::filesystem::path& b);

/// Throws `Error` (input) naming the later output's key when two `outputs` are one file, or an
/// output's key when it is one of `inputs`. Empty paths are skipped.
void check_outputs(std::span<const NamedPath> outputs, std::span<const NamedPath> inputs);

}  // namespace nest
