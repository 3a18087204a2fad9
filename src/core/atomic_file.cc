#include "nest/core/atomic_file.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "nest/core/error.h"

namespace nest {

void write_atomically(const std::filesystem::path& path,
                      const std::function<void(const std::filesystem::path&)>& write) {
  std::filesystem::path temp = path;
  temp += ".tmp." + std::to_string(::getpid());
  try {
    write(temp);
    std::error_code ec;
    std::filesystem::rename(temp, path, ec);
    if (ec) {
      throw Error::input("cannot write output file: " + ec.message(),
                         {.file = path.string(), .expected = "a writable path"});
    }
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
}

void write_text_atomically(const std::filesystem::path& path, std::string_view text) {
  write_atomically(path, [&](const std::filesystem::path& temp) {
    std::ofstream out(temp, std::ios::binary);
    if (!out) {
      throw Error::input("cannot create output file",
                         {.file = path.string(), .expected = "a writable path"});
    }
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) throw Error::input("cannot write output file", {.file = path.string()});
  });
}

}  // namespace nest
