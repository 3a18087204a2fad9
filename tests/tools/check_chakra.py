#!/usr/bin/python3
"""Checks a folder of Chakra ET files written by `nest simulate --chakra` against the run file
of the same replay, with Python's protobuf (Debian's python3-protobuf) and the schema's
generated module, independently of NEST's own reader:

- every device of /topology/nodes has a file <prefix>.<rank>.et: a GlobalMetadata message, then
  Node messages, each preceded by its size as a varint32 (Chakra's protolib encoding);
- per rank, the compute nodes are the device's compute rows of /timeline (the last backward cut
  in one part per gradient bucket), with the same total duration in picoseconds and
  duration_micros their rounding; one send per transfer row; one all-reduce per bucket with
  the sizes of /collectives;
- dependencies name nodes of the same file and form no cycle;
- every send has one receive on its destination with the same tag and size, and back;
- comm_group.json holds the groups of /collectives.

usage: check_chakra.py RUN.h5 DIR PB2_DIR   (PB2_DIR holds et_def_pb2.py from protoc)
Exits 1 naming the first violation; prints the counts when all hold.
"""
import json
import os
import sys
from collections import Counter, defaultdict

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import nest_h5  # noqa: E402


def fail(message):
    print(f"check_chakra: {message}")
    sys.exit(1)


def varint(data, pos):
    shift = result = 0
    while True:
        if pos >= len(data):
            return None, pos
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def messages(path, pb):
    data = open(path, "rb").read()
    pos = 0
    out = []
    while pos < len(data):
        size, pos = varint(data, pos)
        if size is None or pos + size > len(data):
            fail(f"{path}: a message cut short at byte {pos}")
        out.append(data[pos:pos + size])
        pos += size
    if not out:
        fail(f"{path}: no GlobalMetadata")
    meta = pb.GlobalMetadata()
    meta.ParseFromString(out[0])
    nodes = []
    for raw in out[1:]:
        n = pb.Node()
        n.ParseFromString(raw)
        nodes.append(n)
    return meta, nodes


def attrs(node):
    out = {}
    for a in node.attr:
        out[a.name] = getattr(a, a.WhichOneof("value"))
    return out


def main():
    run, folder, pb2 = sys.argv[1:4]
    sys.path.insert(0, pb2)
    import et_def_pb2 as pb  # noqa: E402

    with h5py.File(run, "r") as f:
        t = nest_h5.timeline(f)
        topo = nest_h5.topology(f)
        table = f["/collectives/table"][()]
        members = f["/collectives/members"][()]
        raw = nest_h5.expanded_rows(f, "/timeline")
        ps = {"start": raw["start"], "end": raw["end"]}
    devices = int((topo["nodes"]["kind"] == "device").sum())
    groups_h5 = [tuple(members[o:o + n]) for o, n in zip(table["group_offset"], table["group_size"])]
    sizes_of = defaultdict(list)
    for g, size in zip(groups_h5, table["bytes"]):
        for d in g:
            sizes_of[int(d)].append(int(size))

    names = sorted(n for n in os.listdir(folder) if n.endswith(".et"))
    ranks = sorted(int(n.rsplit(".", 2)[1]) for n in names)
    if ranks != list(range(devices)):
        fail(f"{folder}: ranks {ranks[:3]}..{ranks[-1:]}, expected 0..{devices - 1}")
    prefix = names[0].rsplit(".", 2)[0]
    sends, recvs = {}, Counter()
    types = Counter()
    dependencies = 0
    for rank in ranks:
        path = os.path.join(folder, f"{prefix}.{rank}.et")
        meta, nodes = messages(path, pb)
        mine = t["device"] == rank
        compute = mine & (t["stream"] == "compute")
        buckets = int((mine & (t["kind"] == "gradient_sync")).sum())
        count = Counter(pb.NodeType.Name(n.type) for n in nodes)
        types.update(count)
        want = int(compute.sum()) + (buckets - 1 if buckets else 0)
        if count["COMP_NODE"] != want:
            fail(f"{path}: {count['COMP_NODE']} compute nodes, expected {int(compute.sum())} rows"
                 f" + {max(buckets - 1, 0)} cut parts")
        rows_ps = int((ps["end"][compute] - ps["start"][compute]).sum())
        nodes_ps = 0
        ids = {}
        for n in nodes:
            a = attrs(n)
            if n.id in ids:
                fail(f"{path}: node {n.id}: duplicate id")
            ids[n.id] = n
            dur = a["nest_duration_ps"]
            if n.duration_micros != (dur + 500_000) // 1_000_000:
                fail(f"{path}: node {n.id}: duration_micros {n.duration_micros}, "
                     f"expected {dur} ps rounded")
            if n.type == pb.COMP_NODE:
                nodes_ps += dur
            if n.type == pb.COMM_SEND_NODE:
                key = (rank, a["comm_dst"], a["comm_tag"])
                if key in sends:
                    fail(f"{path}: node {n.id}: a second send with tag {a['comm_tag']}")
                sends[key] = a["comm_size"]
            if n.type == pb.COMM_RECV_NODE:
                recvs[(a["comm_src"], rank, a["comm_tag"], a["comm_size"])] += 1
        if nodes_ps != rows_ps:
            fail(f"{path}: compute nodes last {nodes_ps} ps, the timeline's rows {rows_ps} ps")
        transfers = int((mine & np.isin(t["kind"], ["send_activation", "send_gradient"])).sum())
        if count["COMM_SEND_NODE"] != transfers:
            fail(f"{path}: {count['COMM_SEND_NODE']} sends, expected {transfers}")
        colls = [attrs(n)["comm_size"] for n in nodes if n.type == pb.COMM_COLL_NODE]
        if colls != sizes_of.get(rank, []) or len(colls) != buckets:
            fail(f"{path}: all-reduce sizes {colls}, expected {sizes_of.get(rank, [])}")
        # Dependencies: known ids, no cycle (Kahn).
        waiting = {i: len(n.data_deps) + len(n.ctrl_deps) for i, n in ids.items()}
        users = defaultdict(list)
        for i, n in ids.items():
            for d in list(n.data_deps) + list(n.ctrl_deps):
                if d not in ids:
                    fail(f"{path}: node {i}: depends on unknown node {d}")
                users[d].append(i)
                dependencies += 1
        ready = [i for i, w in waiting.items() if w == 0]
        done = 0
        while ready:
            i = ready.pop()
            done += 1
            for u in users[i]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.append(u)
        if done != len(ids):
            fail(f"{path}: the dependencies form a cycle")
    for (src, dst, tag), size in sends.items():
        if recvs[(src, dst, tag, size)] != 1:
            fail(f"send {src} -> {dst} tag {tag} ({size} B): "
                 f"{recvs[(src, dst, tag, size)]} matching receives")
        del recvs[(src, dst, tag, size)]
    if sum(recvs.values()):
        fail(f"receives without a send: {list(recvs)[:3]}")
    groups = json.load(open(os.path.join(folder, "comm_group.json")))
    if sorted(map(tuple, groups.values())) != sorted(set(groups_h5)):
        fail("comm_group.json: the groups differ from /collectives")
    print(json.dumps({"ranks": len(ranks), "nodes": dict(sorted(types.items())),
                      "dependencies": dependencies, "groups": len(groups),
                      "version": meta.version}))


if __name__ == "__main__":
    main()
