#pragma once
// Private to src/workload: the Boost.Graph DAG of one layer's operators, and how it becomes a
// `LayerGraph` (topological order, traffic, roofline times, merged collectives).

#include <boost/graph/adjacency_list.hpp>
#include <string>
#include <vector>

#include "nest/workload/operator_graph.h"
#include "nest/workload/roofline.h"

namespace nest::workload::detail {

/// Which backward GEMM of the operator a tensor edge feeds a backward collective can run beside
/// (Megatron-LM's asynchronous tensor-parallel communication).
enum class Overlap : std::uint8_t {
  kNone,
  kDgrad,  ///< the input-gradient GEMM
  kWgrad,  ///< the weight-gradient GEMM
};

/// A collective that a tensor edge carries: the operations it runs forward (again when the
/// layer is recomputed) and backward. Megatron's conjugate pairs: f = {} / {allreduce},
/// g = {allreduce} / {}, sequence-parallel all-gather = {allgather} / {reducescatter,
/// allgather}, sequence-parallel reduce-scatter = {reducescatter} / {allgather}.
struct Comm {
  ParallelAxis axis = ParallelAxis::kTensor;
  Bytes size;
  std::vector<CollectiveOp> forward;
  std::vector<CollectiveOp> backward;
  /// Per backward operation: the receiving GEMM's backward kernel it overlaps (empty: none).
  std::vector<Overlap> backward_overlap;
};

/// What a builder is told of an operator; traffic and times follow from it and the edges.
struct OpSpec {
  std::string name;
  OperatorKind kind = OperatorKind::kMemory;
  double flops = 0;
  std::int64_t weight_bytes = 0;   ///< weights read
  std::int64_t external_read = 0;  ///< tensors read from outside the layer (its input)
  std::int64_t output_bytes = 0;   ///< the output tensor written
  std::int64_t extra_write = 0;    ///< other writes (dropout masks, softmax statistics)
  std::int64_t saved_bytes = 0;
  /// Backward FLOPs as a multiple of the forward's (2 for GEMMs: input and weight gradient).
  double backward_factor = 2;
  /// Matmul operators: the forward's GEMM kernels (their FLOPs sum to `flops`). The backward
  /// runs, per kernel (m, n, k), the input gradient (m, k, n) and the weight gradient (k, n, m),
  /// each at its own shape's rate, each reading and writing its operands once.
  std::vector<GemmShape> gemms;
  bool attention_gemm = false;  ///< at the attention core's rate (`Roofline::attention`)
  /// The fraction of the kernels' FLOPs that run (causal flash attention skips masked blocks).
  double gemm_work = 1;
  std::int64_t gemm_element_bytes = 2;  ///< operand bytes of the backward kernels
  /// One fused kernel whose backward is `backward_factor` × its forward's FLOPs and traffic at
  /// the forward's rate (flash attention).
  bool fused_backward = false;
  /// Memory-bound operators: backward HBM traffic as a multiple of the forward's (what the
  /// backward kernel reads and writes: e.g. a norm's backward reads x and dy and writes dx).
  double backward_traffic = 1;
  /// Part of the attention core (QK^T, softmax, softmax dropout, attention over V): rerun under
  /// selective recomputation.
  bool attention_core = false;
  /// Of `saved_bytes`, what selective recomputation does not keep (the s×s tensors).
  std::int64_t recomputed_bytes = 0;
};

struct EdgeData {
  Bytes bytes;
  std::vector<Comm> comms;
};

using Graph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, OpSpec, EdgeData>;
using Vertex = Graph::vertex_descriptor;

/// Builds one layer's DAG. Not thread-safe; one builder per layer.
class GraphBuilder {
 public:
  explicit GraphBuilder(const Roofline& roofline) : roofline_(roofline) {}

  Vertex add(OpSpec spec) { return boost::add_vertex(std::move(spec), graph_); }
  /// A tensor of `bytes` (as `to` reads it) from `from` to `to`, through `comms`.
  void connect(Vertex from, Vertex to, std::int64_t bytes, std::vector<Comm> comms = {});
  /// A collective on the layer's input or output rather than between two of its operators.
  void add_boundary_comm(Comm comm) { boundary_comms_.push_back(std::move(comm)); }

  /// Sorts the DAG (throws `Error` (internal) on a cycle) and fills in the rest.
  [[nodiscard]] LayerGraph finish(std::string name, bool recomputed) const;

 private:
  Roofline roofline_;
  Graph graph_;
  std::vector<Comm> boundary_comms_;
};

}  // namespace nest::workload::detail
