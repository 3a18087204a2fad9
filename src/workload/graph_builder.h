#pragma once
// Private to src/workload: the Boost.Graph DAG of one layer's operators, and how it becomes a
// `LayerGraph` (topological order, traffic, roofline times, merged collectives).

#include <boost/graph/adjacency_list.hpp>
#include <string>
#include <vector>

#include "nest/workload/operator_graph.h"
#include "nest/workload/roofline.h"

namespace nest::workload::detail {

/// A collective that a tensor edge carries: the operations it runs forward (again when the
/// layer is recomputed) and backward. Megatron's conjugate pairs: f = {} / {allreduce},
/// g = {allreduce} / {}, sequence-parallel all-gather = {allgather} / {reducescatter,
/// allgather}, sequence-parallel reduce-scatter = {reducescatter} / {allgather}.
struct Comm {
  ParallelAxis axis = ParallelAxis::kTensor;
  Bytes size;
  std::vector<CollectiveOp> forward;
  std::vector<CollectiveOp> backward;
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
  double backward_factor = 2;
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
