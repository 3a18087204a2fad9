#include "nest/coll/group.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "nest/core/error.h"
#include "nest/core/unit_parse.h"

namespace nest::coll {
namespace {

constexpr const char* kGroupSyntax = "devices and ranges separated by commas, e.g. 0-7,16-23";
constexpr const char* kConcurrentSyntax = "none, stride:S or stride:S:K, e.g. stride:64";

// A non-negative integer that is the whole of `text`.
bool parse_uint(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

[[noreturn]] void bad_group(const std::string& message, std::string_view value,
                            const std::string& expected = kGroupSyntax) {
  throw Error::input(message,
                     {.key = "--group", .value = std::string(value), .expected = expected});
}

[[noreturn]] void bad_concurrent(const std::string& message, std::string_view value) {
  throw Error::input(
      message, {.key = "--concurrent", .value = std::string(value), .expected = kConcurrentSyntax});
}

}  // namespace

std::vector<topo::DeviceId> parse_group(std::string_view text, std::size_t num_devices) {
  std::vector<topo::DeviceId> group;
  const std::string range_expected = "devices 0-" + std::to_string(num_devices - 1);
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    if (dash == std::string_view::npos) {
      if (!parse_uint(item, first)) bad_group("malformed group", item.empty() ? text : item);
      last = first;
    } else if (!parse_uint(item.substr(0, dash), first) ||
               !parse_uint(item.substr(dash + 1), last)) {
      bad_group("malformed device range", item);
    } else if (last < first) {
      bad_group("device range runs backwards", item);
    }
    if (last >= num_devices) {
      bad_group("device out of range", last == first ? item : std::to_string(last), range_expected);
    }
    for (std::uint64_t d = first; d <= last; ++d) group.push_back(static_cast<topo::DeviceId>(d));
    pos = comma + 1;
  }
  std::vector<topo::DeviceId> sorted = group;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end())
    bad_group("device listed twice", std::to_string(*dup), "distinct devices");
  return group;
}

namespace {

// largest + k·stride as text ("more than 2^64" where that sum would wrap).
std::string past_end(std::uint64_t largest, std::uint64_t k, std::uint64_t stride) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  if (stride > (kMax - largest) / k) return "more than 2^64";
  return std::to_string(largest + k * stride);
}

}  // namespace

std::vector<std::vector<topo::DeviceId>> concurrent_groups(const std::vector<topo::DeviceId>& group,
                                                           std::string_view spec,
                                                           std::size_t num_devices) {
  std::vector<std::vector<topo::DeviceId>> groups{group};
  if (spec.empty() || spec == "none") return groups;
  constexpr std::string_view kPrefix = "stride:";
  if (spec.substr(0, kPrefix.size()) != kPrefix) bad_concurrent("malformed concurrency", spec);
  const std::string_view rest = spec.substr(kPrefix.size());
  const std::size_t colon = rest.find(':');
  std::uint64_t stride = 0;
  std::uint64_t count = 0;
  const bool counted = colon != std::string_view::npos;
  if (!parse_uint(rest.substr(0, colon), stride) ||
      (counted && (!parse_uint(rest.substr(colon + 1), count) || count == 0))) {
    bad_concurrent("malformed concurrency", spec);
  }
  if (stride == 0) bad_concurrent("stride must be positive", spec);
  const topo::DeviceId largest = *std::max_element(group.begin(), group.end());
  // Room above the group's largest device; copy k fits when k·stride <= room (no overflow).
  const std::uint64_t room = num_devices - 1 - largest;
  for (std::uint64_t k = 1; !counted || k < count; ++k) {
    if (stride > room / k) {
      if (!counted) break;
      bad_concurrent("copy " + std::to_string(k) + " runs past the last device (" +
                         past_end(largest, k, stride) + " >= " + std::to_string(num_devices) + ")",
                     spec);
    }
    const std::uint64_t shift = k * stride;
    std::vector<topo::DeviceId> copy;
    copy.reserve(group.size());
    for (topo::DeviceId d : group) copy.push_back(static_cast<topo::DeviceId>(d + shift));
    groups.push_back(std::move(copy));
  }
  if (!counted && groups.size() == 1) {
    bad_concurrent("no copy fits: the group shifted by " + std::to_string(stride) +
                       " runs past the last device (" + past_end(largest, 1, stride) +
                       " >= " + std::to_string(num_devices) + ")",
                   spec);
  }
  // Copies must not share devices.
  std::vector<topo::DeviceId> all;
  for (const auto& g : groups) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  const auto dup = std::adjacent_find(all.begin(), all.end());
  if (dup != all.end()) {
    bad_concurrent("copies of the group overlap at device " + std::to_string(*dup), spec);
  }
  return groups;
}

namespace {

constexpr const char* kSweepSyntax =
    "MIN:MAX[:FACTOR] as in nccl-tests -b/-e/-f, e.g. 8:4G:2 (K, M, G = 1024, 1024^2, 1024^3)";

[[noreturn]] void bad_sweep(const std::string& message, std::string_view value) {
  throw Error::input(message,
                     {.key = "--sizes", .value = std::string(value), .expected = kSweepSyntax});
}

// One size of a sweep: nccl-tests' number with an optional K/M/G/T suffix (powers of 1024), or
// a size with a byte unit (parse_bytes).
Bytes sweep_size(std::string_view text) {
  if (text.empty()) bad_sweep("malformed size range", text);
  const char last = text.back();
  const bool unit = last == 'B' || last == 'b';
  if (unit) {
    try {
      return parse_bytes(text);
    } catch (const Error&) {
      bad_sweep("malformed size", text);
    }
  }
  double scale = 1;
  std::string_view digits = text;
  switch (last) {
    case 'K':
    case 'k':
      scale = 1024.0;
      break;
    case 'M':
    case 'm':
      scale = 1024.0 * 1024;
      break;
    case 'G':
    case 'g':
      scale = 1024.0 * 1024 * 1024;
      break;
    case 'T':
    case 't':
      scale = 1024.0 * 1024 * 1024 * 1024;
      break;
    default:
      break;
  }
  if (scale > 1) digits.remove_suffix(1);
  double value = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() ||
      !std::isfinite(value)) {
    bad_sweep("malformed size", text);
  }
  const double bytes = value * scale;
  if (bytes < 1 || bytes > 0x1p62 || bytes != std::floor(bytes)) {
    bad_sweep("sizes must be whole numbers of bytes from 1 B to 2^62 B", text);
  }
  return Bytes(static_cast<std::int64_t>(bytes));
}

}  // namespace

std::vector<Bytes> parse_size_sweep(std::string_view text) {
  const std::size_t first = text.find(':');
  if (first == std::string_view::npos) bad_sweep("malformed size range", text);
  const std::size_t second = text.find(':', first + 1);
  const Bytes low = sweep_size(text.substr(0, first));
  const Bytes high = sweep_size(text.substr(first + 1, second - first - 1));
  std::uint64_t factor = 2;
  if (second != std::string_view::npos && !parse_uint(text.substr(second + 1), factor)) {
    bad_sweep("malformed factor", text);
  }
  if (factor < 2) bad_sweep("the factor must be at least 2", text);
  if (high < low) bad_sweep("the largest size is below the smallest", text);
  std::vector<Bytes> sizes;
  for (std::int64_t s = low.count();; s *= static_cast<std::int64_t>(factor)) {
    sizes.push_back(Bytes(s));
    if (s > high.count() / static_cast<std::int64_t>(factor)) break;
  }
  return sizes;
}

}  // namespace nest::coll
