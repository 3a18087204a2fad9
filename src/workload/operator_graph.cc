#include "nest/workload/operator_graph.h"

#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <iterator>
#include <tuple>

#include "nest/core/error.h"
#include "workload/graph_builder.h"

namespace nest::workload {

Flops LayerGraph::forward_matmul_flops() const {
  Flops total;
  for (const Operator& op : operators) {
    if (op.kind == OperatorKind::kMatmul) total += op.forward_flops;
  }
  return total;
}

Bytes LayerGraph::saved_bytes() const {
  Bytes total;
  for (const Operator& op : operators) total += op.saved_bytes;
  return total;
}

Time LayerGraph::attention_core_forward() const {
  Time total;
  for (const Operator& op : operators) {
    if (op.attention_core) total += op.forward;
  }
  return total;
}

Bytes LayerGraph::recomputed_bytes() const {
  Bytes total;
  for (const Operator& op : operators) total += op.recomputed_bytes;
  return total;
}

namespace detail {
namespace {

// Adds `n` runs of `op` to the entry with the same (op, axis, size, overlap), or a new entry.
void count_collective(std::vector<LayerCollective>& out, const Comm& comm, CollectiveOp op, int n,
                      int recompute_n, Time overlap) {
  for (LayerCollective& c : out) {
    if (c.op == op && c.axis == comm.axis && c.size == comm.size && c.overlap == overlap) {
      c.count += n;
      c.recompute_count += recompute_n;
      return;
    }
  }
  out.push_back(LayerCollective{.op = op,
                                .axis = comm.axis,
                                .size = comm.size,
                                .count = n,
                                .recompute_count = recompute_n,
                                .overlap = overlap});
}

// `target` is the operator the comm's tensor enters (null for boundary comms).
void add_comm(std::vector<LayerCollective>& out, const Comm& comm, bool recomputed,
              const Operator* target) {
  for (CollectiveOp op : comm.forward) {
    count_collective(out, comm, op, 1, recomputed ? 1 : 0, Time::zero());
  }
  for (std::size_t i = 0; i < comm.backward.size(); ++i) {
    Time overlap;
    if (target != nullptr && i < comm.backward_overlap.size()) {
      if (comm.backward_overlap[i] == Overlap::kDgrad) overlap = target->input_gradient;
      if (comm.backward_overlap[i] == Overlap::kWgrad) overlap = target->weight_gradient;
    }
    count_collective(out, comm, comm.backward[i], 1, 0, overlap);
  }
}

struct Timing {
  Time forward;
  Time backward;
  Time input_gradient;
  Time weight_gradient;
  Bytes backward_bytes;
};

Bytes scaled(std::int64_t bytes, double factor) {
  return Bytes(static_cast<std::int64_t>(static_cast<double>(bytes) * factor));
}

// The forward and backward of one operator whose forward moves `bytes` through HBM.
Timing timed(const OpSpec& spec, std::int64_t bytes, const Roofline& r) {
  Timing t;
  if (spec.kind != OperatorKind::kMatmul || spec.gemms.empty()) {
    const FlopRate rate = spec.kind == OperatorKind::kMatmul ? r.matrix : r.vector;
    const double back =
        spec.kind == OperatorKind::kMatmul ? spec.backward_factor : spec.backward_traffic;
    t.forward = roofline_time(Flops(spec.flops), Bytes(bytes), rate, r.memory);
    t.backward_bytes = scaled(bytes, back);
    t.backward =
        roofline_time(Flops(spec.flops * spec.backward_factor), t.backward_bytes, rate, r.memory);
    return t;
  }
  const FlopRate rate = spec.attention_gemm ? r.attention : r.matrix;
  Time compute;
  for (const GemmShape& g : spec.gemms) {
    compute += compute_time(Flops(g.flops() * spec.gemm_work), rate * r.shape_factor(g));
  }
  t.forward = std::max(compute, serialization_time(Bytes(bytes), r.memory));
  if (spec.fused_backward) {
    t.backward_bytes = scaled(bytes, spec.backward_factor);
    t.backward = std::max(Time::picoseconds(static_cast<std::int64_t>(
                              static_cast<double>(compute.ps()) * spec.backward_factor)),
                          serialization_time(t.backward_bytes, r.memory));
    return t;
  }
  const std::int64_t e = spec.gemm_element_bytes;
  for (const GemmShape& g : spec.gemms) {
    // The input gradient dA = dC·Bᵀ and the weight gradient dB = Aᵀ·dC.
    const GemmShape dgrad{.m = g.m, .n = g.k, .k = g.n, .batch = g.batch};
    const GemmShape wgrad{.m = g.k, .n = g.n, .k = g.m, .batch = g.batch};
    const auto traffic = [e](const GemmShape& b) {
      return Bytes((b.m * b.k + b.k * b.n + b.m * b.n) * b.batch * e);
    };
    t.input_gradient += r.gemm_time(dgrad, rate, traffic(dgrad));
    t.weight_gradient += r.gemm_time(wgrad, rate, traffic(wgrad));
    t.backward_bytes += traffic(dgrad) + traffic(wgrad);
  }
  t.backward = t.input_gradient + t.weight_gradient;
  return t;
}

}  // namespace

void GraphBuilder::connect(Vertex from, Vertex to, std::int64_t bytes, std::vector<Comm> comms) {
  boost::add_edge(from, to, EdgeData{Bytes(bytes), std::move(comms)}, graph_);
}

LayerGraph GraphBuilder::finish(std::string name, bool recomputed) const {
  std::vector<Vertex> reverse_order;
  try {
    boost::topological_sort(graph_, std::back_inserter(reverse_order));
  } catch (const boost::not_a_dag&) {
    throw Error::internal("operator graph of layer " + name + " has a cycle");
  }
  const std::vector<Vertex> order(reverse_order.rbegin(), reverse_order.rend());
  std::vector<std::size_t> index(boost::num_vertices(graph_));
  for (std::size_t i = 0; i < order.size(); ++i) index[order[i]] = i;

  LayerGraph g;
  g.name = std::move(name);
  g.recomputed = recomputed;
  for (Vertex v : order) {
    const OpSpec& spec = graph_[v];
    std::int64_t bytes =
        spec.weight_bytes + spec.external_read + spec.output_bytes + spec.extra_write;
    for (auto [e, end] = boost::in_edges(v, graph_); e != end; ++e) {
      bytes += graph_[*e].bytes.count();
    }
    const Timing t = timed(spec, bytes, roofline_);
    g.operators.push_back(Operator{.name = spec.name,
                                   .kind = spec.kind,
                                   .forward_flops = Flops(spec.flops),
                                   .forward_bytes = Bytes(bytes),
                                   .saved_bytes = Bytes(spec.saved_bytes),
                                   .backward_factor = spec.backward_factor,
                                   .backward_bytes = t.backward_bytes,
                                   .forward = t.forward,
                                   .backward = t.backward,
                                   .input_gradient = t.input_gradient,
                                   .weight_gradient = t.weight_gradient,
                                   .attention_core = spec.attention_core,
                                   .recomputed_bytes = Bytes(spec.recomputed_bytes)});
  }
  for (auto [e, end] = boost::edges(graph_); e != end; ++e) {
    g.edges.push_back(TensorEdge{.from = index[boost::source(*e, graph_)],
                                 .to = index[boost::target(*e, graph_)],
                                 .bytes = graph_[*e].bytes});
  }
  // Edges in operator order, so that collectives are listed in the order they first run.
  std::vector<std::size_t> by_order(g.edges.size());
  for (std::size_t i = 0; i < by_order.size(); ++i) by_order[i] = i;
  std::sort(by_order.begin(), by_order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(g.edges[a].to, g.edges[a].from) < std::tie(g.edges[b].to, g.edges[b].from);
  });
  std::vector<const EdgeData*> edge_data;
  for (auto [e, end] = boost::edges(graph_); e != end; ++e) edge_data.push_back(&graph_[*e]);
  for (std::size_t i : by_order) {
    const Operator& target = g.operators[g.edges[i].to];
    for (const Comm& c : edge_data[i]->comms) add_comm(g.collectives, c, recomputed, &target);
  }
  for (const Comm& c : boundary_comms_) add_comm(g.collectives, c, recomputed, nullptr);
  std::vector<TensorEdge> sorted;
  for (std::size_t i : by_order) sorted.push_back(g.edges[i]);
  g.edges = std::move(sorted);
  return g;
}

}  // namespace detail
}  // namespace nest::workload
