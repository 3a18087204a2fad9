"""The topology generators, with the keys of the topology files as keyword arguments:

    nest.topology.fat_tree(k=16, link_bandwidth="400 Gb/s", link_latency="1 us")
    nest.topology.rail_optimized(nodes=16, gpus_per_node=8, ...)

Values with units are strings ("400 Gb/s") as in the files; lists are lists. The result is a
`nest.Topology`; errors name the key as the file loader does.
"""

import json

from . import Topology

_KINDS = ("fat_tree", "spine_leaf", "torus", "rail_optimized", "hierarchical", "dragonfly",
          "explicit")


def generate(kind, name=None, **parameters):
    """A topology of generator `kind` with `parameters` (the keys of its file)."""
    document = {"kind": kind}
    if name is not None:
        document["name"] = name
    document.update(parameters)
    return Topology.from_yaml(json.dumps(document), name or kind)  # JSON is YAML


def _generator(kind):
    def make(name=None, **parameters):
        return generate(kind, name=name, **parameters)
    make.__name__ = kind
    make.__doc__ = f"A `{kind}` topology (the keys of its YAML file as keyword arguments)."
    return make


for _kind in _KINDS:
    globals()[_kind] = _generator(_kind)

load = Topology.load
