#!/usr/bin/python3
"""Checks a NEST run file against the schema in README.md ("HDF5 output").

usage: /usr/bin/python3 scripts/check_run.py RUN.h5 PLAN.yaml
Exits 1 naming the first violation: a missing dataset or attribute, a wrong field type or
unit, row counts that disagree with the plan, or a timeline that is not consistent.
"""
import re
import sys

import os

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nest_h5  # noqa: E402

FIELDS = {
    "/timeline": {"device": "u4", "stream": "u1", "kind": "u1", "stage": "i4", "microbatch": "i4",
                  "first_layer": "i4", "last_layer": "i4", "start": "i8", "end": "i8"},
    "/memory/trace": {"device": "u4", "time": "i8", "bytes": "i8", "category": "u1"},
    "/memory/peak": {"device": "u4", "peak_bytes": "i8"},
    "/timeline_classes": {"device": "u4", "representative": "u4"},
    "/links": {"src": "u4", "dst": "u4", "bytes": "f8", "busy": "i8", "utilization": "f8"},
    "/collectives/table": {"op": "u4", "algorithm": "u4", "group_offset": "u8",
                           "group_size": "u4", "bytes": "i8", "start": "i8", "end": "i8",
                           "closed_form": "i8"},
    "/topology/nodes": {"id": "u4", "name": "O", "kind": "u1", "tier": "i4"},
    "/topology/links": {"src": "u4", "dst": "u4", "bandwidth": "f8", "latency": "i8"},
}
UNITS = {
    "/timeline": {"start": "ps", "end": "ps"},
    "/memory/trace": {"time": "ps", "bytes": "B"},
    "/memory/peak": {"peak_bytes": "B"},
    "/timeline_classes": {},
    "/links": {"bytes": "B", "busy": "ps", "utilization": "1"},
    "/collectives/table": {"bytes": "B", "start": "ps", "end": "ps", "closed_form": "ps"},
    "/topology/nodes": {},
    "/topology/links": {"bandwidth": "B/s", "latency": "ps"},
}
SUMMARY = ["iteration_time_s", "estimate_s", "estimate_error", "sequences_per_s", "tokens_per_s",
           "bubble_fraction", "exposed_communication_s", "peak_memory_bytes",
           "model_flops_utilization"]
META = ["tool_version", "command_line", "input_paths", "input_hashes"]


def fail(message):
    print(f"check_run: {message}")
    sys.exit(1)


def plan_numbers(path):
    text = open(path).read()
    get = lambda key: int(re.search(rf"^{key}: (\d+)$", text, re.M).group(1))
    per_replica = int(re.search(r"devices_per_replica: (\d+)", text).group(1))
    # Plans written before interleaving was planned have no virtual_stages: 1F1B.
    virtual = re.search(r"^virtual_stages: (\d+)$", text, re.M)
    chunks = int(virtual.group(1)) if virtual else 1
    return get("stages"), get("data_parallel"), get("microbatches"), per_replica, chunks


def check_topology(f, timeline):
    """The node and link tables: ids in order, unique names, devices first, every /links row a
    directed link of the table, every timeline device a device node."""
    topo = nest_h5.topology(f)
    nodes, links = topo["nodes"], topo["links"]
    n = len(nodes["id"])
    if not topo["name"]:
        fail("/topology: attribute name is empty")
    if list(nodes["id"]) != list(range(n)):
        fail("/topology/nodes: ids are not 0..n-1 in order")
    if len(set(nodes["name"])) != n:
        fail("/topology/nodes: names are not unique")
    kinds = list(nodes["kind"])
    devices = kinds.count("device")
    if kinds != ["device"] * devices + ["switch"] * (n - devices):
        fail("/topology/nodes: devices do not come first")
    if ((nodes["tier"] == 0) != (nodes["kind"] == "device")).any():
        fail("/topology/nodes: a device with a tier or a switch at tier 0")
    if (links["src"] >= n).any() or (links["dst"] >= n).any():
        fail("/topology/links: a node id outside /topology/nodes")
    if (links["bandwidth"] <= 0).any() or (links["latency"] <= 0).any():
        fail("/topology/links: a link without bandwidth or latency")
    table = set(zip(links["src"].tolist(), links["dst"].tolist()))
    used = f["/links"][()]
    for src, dst in zip(used["src"].tolist(), used["dst"].tolist()):
        if (src, dst) not in table:
            fail(f"/links: {src} -> {dst} is not a link of /topology/links")
    if len(timeline) and int(timeline["device"].max()) >= devices:
        fail("/timeline: a device id that is not a device of /topology/nodes")


def main():
    run, plan = sys.argv[1], sys.argv[2]
    stages, replicas, microbatches, shards, chunks = plan_numbers(plan)
    with h5py.File(run, "r") as f:
        for path, fields in FIELDS.items():
            if path not in f:
                fail(f"{path} missing")
            ds = f[path]
            for name, kind in fields.items():
                if name not in ds.dtype.names:
                    fail(f"{path}: field {name} missing")
                base = ds.dtype[name].base if ds.dtype[name].subdtype else ds.dtype[name]
                if kind == "O":  # a variable-length UTF-8 string
                    info = h5py.check_string_dtype(base)
                    if info is None or info.encoding != "utf-8" or info.length is not None:
                        fail(f"{path}.{name}: not a variable-length UTF-8 string")
                    continue
                if base.str.lstrip("<>|=") != kind:
                    fail(f"{path}.{name}: type {base.str}, expected {kind}")
            for name, unit in UNITS[path].items():
                got = ds.attrs.get(f"{name}.unit")
                got = nest_h5.text(got) if got is not None else None
                if got != unit:
                    fail(f"{path}: {name}.unit is {got!r}, expected {unit!r}")
        for key in SUMMARY:
            if key not in f["/summary"].attrs:
                fail(f"/summary: attribute {key} missing")
        for key in META:
            if key not in f["/meta"].attrs:
                fail(f"/meta: attribute {key} missing")
            if h5py.check_string_dtype(f["/meta"].attrs.get_id(key).dtype) is None:
                fail(f"/meta: attribute {key} is not a string")
        if not isinstance(f["/meta"].get("plan_yaml"), h5py.Dataset):
            fail("/meta/plan_yaml: dataset missing")
        info = h5py.check_string_dtype(f["/meta/plan_yaml"].dtype)
        if info is None or info.encoding != "utf-8" or info.length is not None:
            fail("/meta/plan_yaml: not a variable-length UTF-8 string")
        m = nest_h5.meta(f)
        if m["plan_yaml"] != open(plan, encoding="utf-8").read():
            fail("/meta/plan_yaml differs from the plan file")
        if len(m["input_paths"]) != len(m["input_hashes"]):
            fail("/meta: input_paths and input_hashes differ in length")

        devices = stages * replicas * shards
        # Every device's rows (a file holds one device per timeline class by default).
        t = nest_h5.expanded_rows(f, "/timeline")
        classes = f["/timeline_classes"][()]
        if len(classes) != devices:
            fail(f"/timeline_classes: {len(classes)} rows, expected {devices}")
        if not set(classes["representative"]) <= set(f["/timeline"]["device"]):
            fail("/timeline_classes: a representative without /timeline rows")
        kinds = {v: k for k, v in h5py.check_enum_dtype(f["/timeline"].dtype["kind"]).items()}
        names = np.array([kinds[k] for k in t["kind"]])
        # Every device runs one forward and one backward per microbatch of its replica and chunk.
        for kind in ("forward", "backward"):
            got = int((names == kind).sum())
            want = microbatches * stages * shards * chunks
            if got != want:
                fail(f"/timeline: {got} {kind} rows, expected "
                     f"{microbatches} x {stages} x {shards} x {chunks} = {want}")
        if len(np.unique(t["device"])) != devices:
            fail(f"/timeline: {len(np.unique(t['device']))} devices, expected {devices}")
        if (t["end"] < t["start"]).any():
            fail("/timeline: a row ends before it starts")
        iteration_ps = round(float(f["/summary"].attrs["iteration_time_s"]) * 1e12)
        if abs(int(t["end"].max()) - iteration_ps) > 1:
            fail(f"/timeline: last end {t['end'].max()} ps, iteration {iteration_ps} ps")
        if len(f["/memory/peak"]) != devices:
            fail(f"/memory/peak: {len(f['/memory/peak'])} rows, expected {devices}")
        peak = int(f["/memory/peak"]["peak_bytes"].max())
        if peak != int(f["/summary"].attrs["peak_memory_bytes"]):
            fail("/memory/peak: largest peak differs from /summary peak_memory_bytes")
        table = f["/collectives/table"][()]
        members = f["/collectives/members"][()]
        if len(table) and int(table["group_offset"][-1] + table["group_size"][-1]) != len(members):
            fail("/collectives: members do not add up to the groups")
        check_topology(f, t)
    print(f"check_run: {run} follows the schema ({devices} devices, {len(t)} timeline rows)")


if __name__ == "__main__":
    main()
