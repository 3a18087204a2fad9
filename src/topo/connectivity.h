#pragma once
// Reachability over directed links, shared by the validation of generated topologies and the
// loader of explicit ones (private to src/topo).

#include <vector>

#include "nest/topo/topology.h"

namespace nest::topo::detail {

/// seen[n] != 0 for every node that `from` reaches over directed links. O(nodes + links).
inline std::vector<char> reachable(const Topology& t, NodeId from) {
  std::vector<char> seen(t.num_nodes(), 0);
  std::vector<NodeId> queue = {from};
  seen[from] = 1;
  for (std::size_t head = 0; head < queue.size(); ++head) {
    for (const LinkId l : t.out_links(queue[head])) {
      const NodeId next = t.link(l).dst;
      if (seen[next] == 0) {
        seen[next] = 1;
        queue.push_back(next);
      }
    }
  }
  return seen;
}

}  // namespace nest::topo::detail
