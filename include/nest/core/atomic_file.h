#pragma once
/// \file
/// Output files appear whole or not at all: every writer writes to a temporary name in the
/// target folder and renames it when complete (rename is atomic within one file system).

#include <filesystem>
#include <functional>
#include <string_view>

namespace nest {

/// Calls `write(temporary_path)`, then renames the temporary file to `path`. If `write` throws,
/// the temporary file is removed and the exception propagates; `path` is never half-written.
/// Throws `Error` (input) when the folder is not writable.
void write_atomically(const std::filesystem::path& path,
                      const std::function<void(const std::filesystem::path&)>& write);

/// Writes `text` to `path` atomically.
void write_text_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace nest
