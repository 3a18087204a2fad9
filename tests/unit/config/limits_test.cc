// Strict reading beyond YAML (issue 17, defects 4, 6 and 7): what a file may be, how large, how
// deep, and what an error may show of it.
#include "nest/config/limits.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "nest/config/node.h"

namespace nest::config {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput) << e.what();
    return e.what();
  }
  return "(no error)";
}

// A scratch folder removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    char name[] = "/tmp/nest_limits_XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] std::string file(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ReadInputFile, ReadsARegularFile) {
  const ScratchDir dir;
  EXPECT_EQ(read_input_file(dir.file("a.yaml", "kind: torus\n")), "kind: torus\n");
}

// /dev/zero used to be read until memory ran out.
TEST(ReadInputFile, RefusesDevicesFifosAndFolders) {
  EXPECT_EQ(error_of([] { (void)read_input_file("/dev/zero"); }),
            "/dev/zero: not a regular file but a character device (expected a readable YAML "
            "file)");
  const ScratchDir dir;
  EXPECT_EQ(error_of([&] { (void)read_input_file(dir.path(), 100, "a readable plan file"); }),
            dir.path() + ": not a regular file but a folder (expected a readable plan file)");
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opened without blocking: no writer needed to get the error.
  EXPECT_EQ(error_of([&] { (void)read_input_file(fifo); }),
            fifo + ": not a regular file but a FIFO (expected a readable YAML file)");
}

TEST(ReadInputFile, RefusesFilesOverTheLimit) {
  const ScratchDir dir;
  const std::string p = dir.file("big.yaml", std::string(1025, 'a'));
  EXPECT_EQ(read_input_file(p, 1025).size(), 1025U);
  EXPECT_EQ(error_of([&] { (void)read_input_file(p, 1024); }),
            p + ": file too large (got \"1025 bytes\"; expected at most 1024 bytes (1 KiB; "
                "--max-input-size raises the limit))");
  EXPECT_EQ(kDefaultMaxInputBytes, 64 << 20);
}

// A path over 4,096 bytes was an internal error (the filesystem's exception).
TEST(ReadInputFile, RefusesPathsOverPathMax) {
  const std::string path(5000, 'a');
  EXPECT_EQ(error_of([&] { (void)read_input_file(path); }),
            "path too long (got 5000 bytes beginning \"" + std::string(kValueExcerpt, 'a') +
                "...\"; expected a path of at most 4095 bytes)");
}

TEST(ReadInputFile, NamesTheSystemsReason) {
  EXPECT_EQ(error_of([] { (void)read_input_file("/nonexistent/x.yaml"); }),
            "/nonexistent/x.yaml: cannot open file: No such file or directory (expected a "
            "readable YAML file)");
}

TEST(MachineMemoryLimit, IsHalfOfSomethingPositive) {
  const std::int64_t limit = machine_memory_limit();
  EXPECT_GT(limit, std::int64_t{64} << 20);
  EXPECT_EQ(Limits{}.max_memory_bytes, limit);
}

// yaml-cpp kept both of two equal keys and a lookup found the first.
TEST(StrictYaml, DuplicateKeysAreErrors) {
  EXPECT_EQ(
      error_of([] { (void)Node::load_string("kind: torus\ndims: [2]\nkind: ring\n", "t.yaml"); }),
      "t.yaml:3: kind: duplicate key \"kind\" (expected each key once in a map)");
  EXPECT_EQ(error_of([] { (void)Node::load_string("links:\n  - {a: x, b: y, a: z}\n", "t.yaml"); }),
            "t.yaml:2: links[0].a: duplicate key \"a\" (expected each key once in a map)");
}

// A second document used to be ignored.
TEST(StrictYaml, ASecondDocumentIsAnError) {
  EXPECT_EQ(error_of([] { (void)Node::load_string("kind: torus\n---\nkind: ring\n", "t.yaml"); }),
            "t.yaml:2: a second YAML document (expected one document per file)");
  // yaml-cpp's LoadAll never returned on a lone "," (tests/fuzz/ found it).
  EXPECT_EQ(error_of([] { (void)Node::load_string(",", "t.yaml"); }),
            "t.yaml:1: malformed YAML: unexpected text");
  EXPECT_EQ(error_of([] { (void)Node::load_string("- a\n,\n", "t.yaml"); }),
            "t.yaml:2: malformed YAML: unexpected text");
  EXPECT_NO_THROW((void)Node::load_string("---\nkind: torus\n...\n", "t.yaml"));
}

std::string nested(int depth) {
  return "a: " + std::string(static_cast<std::size_t>(depth - 1), '[') + "1" +
         std::string(static_cast<std::size_t>(depth - 1), ']') + "\n";
}

// Nesting past yaml-cpp's guard said "malformed YAML: bad file".
TEST(StrictYaml, NestingDeeperThanTheLimitHasItsOwnMessage) {
  EXPECT_NO_THROW((void)Node::load_string(nested(kMaxYamlDepth), "t.yaml"));
  const std::string expected =
      "t.yaml:1: nesting too deep (expected at most 32 levels of maps and lists)";
  EXPECT_EQ(error_of([] { (void)Node::load_string(nested(kMaxYamlDepth + 1), "t.yaml"); }),
            expected);
  EXPECT_EQ(error_of([] { (void)Node::load_string(nested(3000), "t.yaml"); }), expected);
}

// Ten levels of ten aliases each: 10^10 nodes from 400 bytes.
TEST(StrictYaml, AliasesMayNotExpandPastTheFile) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  const std::string e = error_of([&] { (void)Node::load_string(text, "t.yaml"); });
  EXPECT_EQ(e.rfind("t.yaml:", 0), 0U) << e;
  EXPECT_NE(e.find("aliases expand to too many nodes"), std::string::npos) << e;
  EXPECT_NO_THROW((void)Node::load_string("a: &x [1, 2]\nb: *x\n", "t.yaml"));
}

TEST(StrictYaml, TextMustBeUtf8) {
  EXPECT_EQ(error_of([] { (void)Node::load_string("kind: torus\nname: \xff\xfe\n", "t.yaml"); }),
            "t.yaml:2: not UTF-8 text (got \"byte 0xff\"; expected a YAML file in UTF-8)");
  EXPECT_NO_THROW((void)Node::load_string("name: \xc3\xa9t\xc3\xa9\n", "t.yaml"));
}

TEST(StrictYaml, ControlCharactersAreNotYamlText) {
  EXPECT_EQ(error_of([] {
              (void)Node::load_string(
                  "kind: torus\nname: a\x01"
                  "b\n",
                  "t.yaml");
            }),
            "t.yaml:2: control character in the text (got \"byte 0x01\"; expected YAML text: no "
            "control characters but tab and line breaks)");
  EXPECT_NO_THROW((void)Node::load_string("kind:\ttorus\r\nname: \"\\e\"\n", "t.yaml"));
}

TEST(StrictYaml, MapKeysAreScalars) {
  EXPECT_EQ(error_of([] { (void)Node::load_string("? [a, b]\n: 1\n", "t.yaml"); }),
            "t.yaml:1: (document): a map key must be a scalar (expected a name)");
}

// A path given where a NEST file was expected (/etc/passwd) was printed in full.
TEST(StrictYaml, AScalarDocumentIsNeverEchoed) {
  const Node n = Node::load_string("root:x:0:0:root:/root:/bin/bash\nsecret line\n", "passwd");
  EXPECT_EQ(error_of([&] { n.expect_keys({"kind"}); }),
            "passwd:1: (document): expected a map (expected a map with keys kind)");
}

// An escape sequence in a value cleared the terminal; a 10 MB value made a 10 MB line.
TEST(StrictYaml, ValuesAreShownEscapedAndShort) {
  const Node n = Node::load_string("kind: \"\\e[2J\\e[Hfake\"\n", "t.yaml");
  EXPECT_EQ(error_of([&] { (void)n.at("kind").as_choice({"torus"}); }),
            "t.yaml:1: kind: unknown value (got \"\\x1b[2J\\x1b[Hfake\"; expected one of torus)");
  const Node big = Node::load_string("kind: " + std::string(10 << 20, 'x') + "\n", "t.yaml");
  const std::string e = error_of([&] { (void)big.at("kind").as_choice({"torus"}); });
  EXPECT_EQ(e, "t.yaml:1: kind: unknown value (got 10485760 bytes beginning \"" +
                   std::string(kValueExcerpt, 'x') + "...\"; expected one of torus)");
  const Node key = Node::load_string("\"\\e]0;owned\\a\": 1\n", "t.yaml");
  EXPECT_EQ(error_of([&] { key.expect_keys({"kind"}); }),
            "t.yaml:1: \\x1b]0;owned\\x07: unknown key \"\\x1b]0;owned\\x07\" (expected one of "
            "kind)");
}

}  // namespace
}  // namespace nest::config
