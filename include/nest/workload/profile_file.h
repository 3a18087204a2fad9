#pragma once
/// \file
/// Layer-profile files (`workloads/profiles/*.yaml`): measured or published per-layer numbers
/// per parallel variant, read into the same `LayerProfile` that a model + accelerator gives.
///
/// Format (the one of the NEST artifact's profiles in workloads/profiles/; keys marked * are
/// optional):
/// ```yaml
/// kind: layer_profile
/// model: gpt3-175b
/// accelerator: h100
/// sequence_length: 2048
/// micro_batch: 1                  # sequences per microbatch
/// global_batch: 4096              # sequences per iteration
/// time_unit: ms                   # unit of every time below: ps, ns, us, ms or s
/// hbm: 90 GiB                     # memory of one device
/// activation_recomputation: true  # whether plans may recompute activations
/// total_parameters: 174604259328  # * whole model, for reports
/// peak_flop_rate: 989 TFLOP/s     # * per device, for MFU
/// variants:
///   - tensor_parallel: 4
///     expert_parallel: 1          # * default 1
///     context_parallel: 1         # * default 1
///     sequence_parallel: false    # * default false
///     devices_per_replica: 4      # * default t·c·e
///     microbatches: 4096          # * default global_batch / micro_batch
///     source: "..."               # * free text
///     layers:
///       - name: transformer_block
///         repeat: 96              # * this layer n times in a row (default 1)
///         forward: 8.3423         # per microbatch, in time_unit
///         backward: 5.7377
///         recompute: 5.7377       # * extra time under recomputation (default: forward)
///         selective_recompute: 0.9  # * extra time under selective recomputation (the
///                                 #   attention core's forward; default 0)
///         parameter_bytes: 906209280    # per device; bytes are integers or "1.5 GiB"
///         activation_bytes: 5447034934
///         selective_activation_bytes: 3e9  # * kept under selective recomputation (default:
///                                 #   activation_bytes); a profile with either selective key
///                                 #   on some layer allows selective recomputation
///         input_bytes: 50331648
///         output_bytes: 50331648  # * default: the next layer's input_bytes (the last
///                                 #   layer: its own input_bytes)
///         parameters: 453104640   # * default: parameter_bytes / 2 (2-byte weights)
///         flops: 1.2e12           # * forward + backward FLOPs per device (default 0)
///         collectives:            # * intra-layer collectives per microbatch (default none)
///           - {op: allreduce, axis: tensor, size: 48 MiB, count: 4, recompute_count: 2}
/// ```
/// `op` is one of allreduce, allgather, reducescatter, alltoall; `axis` one of tensor, expert,
/// context; `size` follows `LayerCollective`. Unknown keys, wrong types and impossible values
/// are errors naming file, line and key.

#include <string>
#include <string_view>

#include "nest/config/limits.h"
#include "nest/workload/layer_profile.h"

namespace nest::workload {

/// Reads a layer-profile file (by `config::read_input_file`). Throws `Error` (input) naming
/// file, line and key on any problem. Ranges: at most 4,098 layers in a variant and 1,000,000
/// over all variants together (repeats expanded), sequence_length as a model's, global_batch and
/// microbatches at most 2^30, degrees and their product at most 2^20, parameters at most 2^56,
/// flops at most 1e30 per layer, hbm and peak_flop_rate as an accelerator's; and per variant
/// one iteration on one device (Σ forward + backward + recompute × microbatches) below 2^61
/// ps and its bytes below 2^62 (see `check_variant_totals` in src/workload/size_check.h).
[[nodiscard]] LayerProfile load_layer_profile(const std::string& path,
                                              const config::Limits& limits = {});

/// Parses layer-profile YAML from `text`; `name` stands for the file name in errors.
[[nodiscard]] LayerProfile parse_layer_profile(std::string_view text, const std::string& name);

}  // namespace nest::workload
