#pragma once
/// \file
/// A collective model: how fast a collective library (NCCL) really drives a topology's links,
/// as measured or as the library's own tuner assumes. The topology is the hardware at line rate;
/// the model says, per protocol, which fraction of each link class's line rate a collective
/// reaches, what a step costs in latency on it, what a collective costs before its first byte
/// moves, which message sizes use the protocol (the switch points), and how many channels
/// (parallel rings) a collective uses. nest/coll applies it by giving the simulator calibrated
/// link rates and latencies; the simulator stays exact for what it is given.
///
/// File format (`kind: collective_model`, or the same keys inline under a topology's
/// `collectives:`):
///
/// ```yaml
/// kind: collective_model
/// name: nvlink4                      # optional, default: the file name
/// description: ...                   # optional
/// channels: 8                        # optional: rings across scale-up domains (one per NIC)
/// nvls: {efficiency: 0.85, base_latency: 68 us}   # optional: NVLink SHARP (see below)
/// protocols:                         # one or more of LL, LL128, Simple, in this order
///   LL:
///     up_to: 2 MiB                   # switch point: the largest size that uses LL
///     base_latency: 8.5 us           # per collective; or a map by operation, see below
///     scale_up: {efficiency: 0.313, latency: 0.3 us}
///     nic: {efficiency: 0.475, latency: 1.35 us}
///     fabric: {efficiency: 0.475}
///   LL128: {...}
///   Simple: {...}                    # the last protocol has no up_to: it takes every larger size
/// ```
///
/// - A size uses the first listed protocol whose `up_to` it does not exceed.
/// - `base_latency` is a time, or a map from operation names (allreduce, reduce_scatter,
///   all_gather, all_to_all, broadcast, reduce, gather, scatter, sendrecv, send) to times with an
///   optional `default` for the others.
/// - Link classes: `scale_up` is a link inside a scale-up domain (a device and a switch that
///   serves only that domain's devices, e.g. GPU and NVSwitch, or two devices of one domain);
///   `nic` is any other link of a device (its network port); `fabric` joins two switches. Each
///   has an `efficiency` in (0, 1] (the fraction of the line rate the protocol achieves) and an
///   optional `latency` per link that replaces the topology's. A class a protocol does not list
///   keeps its line rate and latency.
/// - `nvls`: allreduce inside one NVLink SHARP domain runs at the Simple protocol's scale-up
///   rate times `efficiency` and costs `base_latency` (instead of the protocol's).
///
/// A topology names its model with `collectives: FILE`, a list of files whose contents are
/// merged (each field may be given by one file only: e.g. the NVLink file gives the base
/// latencies and the `scale_up` class, the InfiniBand file the `nic` and `fabric` classes), or
/// an inline map. Files are paths relative to the topology file's folder.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nest/core/units.h"

namespace nest::config {
class Node;
}

namespace nest::topo {

/// NCCL's protocols, in the order a model lists them.
enum class Protocol : std::uint8_t {
  kLL,      ///< 8-byte lines with a 4-byte flag: lowest latency, half the bandwidth
  kLL128,   ///< 128-byte lines with an 8-byte flag
  kSimple,  ///< plain copies with fences: full bandwidth, highest latency
};
inline constexpr std::size_t kProtocols = 3;

/// What a directed link is, for calibration.
enum class LinkClass : std::uint8_t {
  kScaleUp,  ///< inside one scale-up domain (NVLink, NVSwitch)
  kNic,      ///< a device's other links (its network port)
  kFabric,   ///< switch to switch outside any scale-up domain
};
inline constexpr std::size_t kLinkClasses = 3;

/// "LL", "LL128", "Simple".
[[nodiscard]] const char* protocol_name(Protocol protocol) noexcept;
/// "scale_up", "nic", "fabric".
[[nodiscard]] const char* link_class_name(LinkClass link_class) noexcept;

/// One link class under one protocol.
struct LinkCalibration {
  double efficiency = 1;        ///< fraction of the line rate reached, in (0, 1]
  std::optional<Time> latency;  ///< per link; replaces the topology's when given
};

/// One protocol of a model.
struct ProtocolModel {
  bool enabled = false;              ///< listed in the model
  std::optional<Bytes> up_to;        ///< switch point: largest size that uses it (none: no limit)
  std::optional<Time> base_latency;  ///< per collective, unless the operation has its own
  /// Per-operation base latencies (operation name as nest/coll spells it, time).
  std::vector<std::pair<std::string, Time>> operation_latency;
  std::array<std::optional<LinkCalibration>, kLinkClasses> links;  ///< by LinkClass
};

/// NVLink SHARP (in-switch reduction) calibration.
struct NvlsModel {
  double efficiency = 1;  ///< of the Simple protocol's scale-up rate, in (0, 1]
  Time base_latency;      ///< per collective
};

/// A collective model (see the file comment).
struct CollectiveModel {
  std::string name;                  ///< the files' names joined with "+", or the inline name
  std::vector<std::string> sources;  ///< the files it was read from
  std::optional<int> channels;       ///< rings across scale-up domains
  std::optional<NvlsModel> nvls;
  std::array<ProtocolModel, kProtocols> protocols;  ///< by Protocol

  /// The protocol a collective of `size` uses: the first enabled one whose up_to >= size.
  [[nodiscard]] Protocol protocol_for(Bytes size) const noexcept;
  /// Base latency of `operation` (a nest/coll name) under `protocol`: its own entry, else the
  /// protocol's base_latency, else zero.
  [[nodiscard]] Time base_latency(Protocol protocol, std::string_view operation) const;
};

/// The operation names a model may list under base_latency (those of nest/coll/collective.h).
[[nodiscard]] std::span<const std::string_view> collective_operation_names() noexcept;

/// Reads a model from a `collectives:` value of a topology (a file name, a list of file names, or
/// an inline map); files are relative to `base_dir`. Throws `Error` (input) naming file, line
/// and key for unknown keys, bad values, a field given by two files, protocols out of order, an
/// `up_to` on the last protocol or none missing elsewhere, and unreadable files.
[[nodiscard]] CollectiveModel parse_collective_model(const config::Node& value,
                                                     const std::string& base_dir);

/// Reads a `kind: collective_model` file.
[[nodiscard]] CollectiveModel load_collective_model(const std::string& path);

}  // namespace nest::topo
