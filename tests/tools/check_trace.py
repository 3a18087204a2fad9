#!/usr/bin/python3
"""Checks a Chrome / Perfetto trace-event JSON file (plain or gzip) against the rules Perfetto's
JSON importer applies (the Trace Event Format document and Perfetto's json_trace_parser):

- the file is an object with a "traceEvents" array (or a bare array of events);
- every event has a known one-letter phase and the fields that phase requires (X: name, ts,
  dur >= 0, pid, tid; C: name, ts, pid and numeric args; M: a known metadata name with its
  argument; s/t/f: name, cat, id, ts, pid, tid; ...), timestamps finite and not negative;
- complete slices on one thread nest (a slice that starts inside another ends inside it:
  Perfetto drops partial overlaps);
- every counter track (pid, name, argument) has strictly increasing timestamps in file order
  and finite values;
- flows match: v1 (cat, name, id) has one "s" and one "f" no earlier; v2 bind_id has one
  slice with flow_out and one with flow_in, the second starting no earlier;
- with --require-names, every pid and (pid, tid) that has events is named.

usage: check_trace.py TRACE [--require-names] [--stats]
Exits 1 naming the first violation ("event 12 (X): missing dur"); --stats prints a JSON summary
(events, slices, flows, processes in sort order, counter tracks) after the check.
"""
import gzip
import json
import math
import sys

PHASES = set("BEXiICbneMstfPNODRVvc()")
METADATA = {"process_name": "name", "process_labels": "labels", "process_sort_index": "sort_index",
            "thread_name": "name", "thread_sort_index": "sort_index",
            "process_uptime_seconds": "uptime", "num_cpus": "number", "trace_buffer_overrun": None}


def q(value):
    """A value as JSON writes it, for messages."""
    return json.dumps(value)


class Violation(Exception):
    pass


def ns(us):
    """A timestamp in microseconds as Perfetto stores it: whole nanoseconds, rounded."""
    return int(round(us * 1000.0))


def load(path):
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        data = f.read()
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Violation(f"not JSON: {e}")
    if isinstance(doc, list):
        return doc
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise Violation('not an object with a "traceEvents" array')
    unit = doc.get("displayTimeUnit", "ms")
    if unit not in ("ms", "ns"):
        raise Violation(f'displayTimeUnit is {q(unit)}, expected "ms" or "ns"')
    return doc["traceEvents"]


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v):
    return (is_int(v) or isinstance(v, float)) and math.isfinite(v)


def need(e, where, *fields):
    for f in fields:
        if f not in e:
            raise Violation(f"{where}: missing {f}")


def check_fields(i, e):
    if not isinstance(e, dict):
        raise Violation(f"event {i}: not an object")
    ph = e.get("ph")
    if not isinstance(ph, str) or len(ph) != 1 or ph not in PHASES:
        raise Violation(f"event {i}: unknown phase {q(ph)}")
    where = f"event {i} ({ph})"
    if "ts" in e and (not is_number(e["ts"]) or e["ts"] < 0):
        raise Violation(f"{where}: ts {q(e['ts'])} is not a finite number >= 0")
    for key in ("pid", "tid"):
        if key in e and not (is_int(e[key]) or isinstance(e[key], str)):
            raise Violation(f"{where}: {key} {q(e[key])} is not an integer or a string")
    if ph == "X":
        need(e, where, "name", "ts", "dur", "pid", "tid")
        if not is_number(e["dur"]) or e["dur"] < 0:
            raise Violation(f"{where}: dur {q(e['dur'])} is not a finite number >= 0")
    elif ph in "BE":
        need(e, where, "ts", "pid", "tid")
        if ph == "B":
            need(e, where, "name")
    elif ph in "iI":
        need(e, where, "name", "ts")
        scope = e.get("s", "t")
        if scope not in ("g", "p", "t"):
            raise Violation(f"{where}: scope {q(scope)}, expected g, p or t")
        need(e, where, *({"g": [], "p": ["pid"], "t": ["pid", "tid"]}[scope]))
    elif ph == "C":
        need(e, where, "name", "ts", "pid", "args")
        if not isinstance(e["args"], dict) or not e["args"]:
            raise Violation(f"{where}: args is not a non-empty object")
        for k, v in e["args"].items():
            if not is_number(v):
                raise Violation(f"{where}: counter {k} value {q(v)} is not a finite number")
    elif ph == "M":
        need(e, where, "name", "pid")
        if e["name"] not in METADATA:
            raise Violation(f"{where}: unknown metadata {q(e['name'])}")
        arg = METADATA[e["name"]]
        if e["name"].startswith("thread_"):
            need(e, where, "tid")
        if arg is not None:
            args = e.get("args")
            if not isinstance(args, dict) or arg not in args:
                raise Violation(f"{where}: {e['name']} without args.{arg}")
            if arg == "sort_index" and not is_int(args[arg]):
                raise Violation(f"{where}: sort_index {q(args[arg])} is not an integer")
            if arg == "name" and not isinstance(args[arg], str):
                raise Violation(f"{where}: name {q(args[arg])} is not a string")
    elif ph in "stf":
        need(e, where, "name", "cat", "id", "ts", "pid", "tid")
        if ph == "f" and e.get("bp", "e") not in ("e", "n"):
            raise Violation(f"{where}: bp {q(e['bp'])}, expected e")
    elif ph in "bne":
        need(e, where, "name", "cat", "ts", "pid")
        if "id" not in e and "id2" not in e:
            raise Violation(f"{where}: missing id")
    if ("flow_in" in e or "flow_out" in e) and ph not in "XB":
        raise Violation(f"{where}: flow_in/flow_out on a {ph} event")
    if ("flow_in" in e or "flow_out" in e) and "bind_id" not in e:
        raise Violation(f"{where}: flow_in/flow_out without bind_id")


def check_nesting(slices):
    """slices: (pid, tid) -> [(ts, dur, index)]."""
    for (pid, tid), rows in slices.items():
        rows.sort(key=lambda r: (r[0], -r[1], r[2]))
        stack = []
        for ts, dur, i in rows:
            while stack and stack[-1][0] <= ts:
                stack.pop()
            end = ts + dur
            if stack and end > stack[-1][0]:
                raise Violation(f"event {i} (X) on pid {pid} tid {tid}: [{ts}, {end}] ns overlaps "
                                f"event {stack[-1][1]} ending at {stack[-1][0]} ns without "
                                "nesting")
            stack.append((end, i))


def check(events, require_names=False):
    slices = {}
    counters = {}
    v1 = {}
    v2 = {}
    named_pids, named_threads, used_pids, used_threads = set(), set(), set(), set()
    sort_index = {}
    process_names = {}
    open_b = {}
    for i, e in enumerate(events):
        check_fields(i, e)
        ph = e["ph"]
        if ph == "M":
            if e["name"] == "process_name":
                named_pids.add(e["pid"])
                process_names[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                named_threads.add((e["pid"], e["tid"]))
            elif e["name"] == "process_sort_index":
                sort_index[e["pid"]] = e["args"]["sort_index"]
            continue
        if "pid" in e:
            used_pids.add(e["pid"])
        if ph in "XBEistf":
            used_threads.add((e.get("pid"), e.get("tid")))
        if ph == "X":
            slices.setdefault((e["pid"], e["tid"]), []).append((ns(e["ts"]), ns(e["dur"]), i))
        elif ph == "B":
            open_b.setdefault((e["pid"], e["tid"]), []).append(i)
        elif ph == "E":
            if not open_b.get((e["pid"], e["tid"])):
                raise Violation(f"event {i} (E): no open B on pid {e['pid']} tid {e['tid']}")
            open_b[(e["pid"], e["tid"])].pop()
        elif ph == "C":
            for k, v in e["args"].items():
                track = (e["pid"], e["name"], k)
                last = counters.get(track)
                if last is not None and ns(e["ts"]) <= last[0]:
                    raise Violation(f"event {i} (C): counter {e['name']} {k} of pid {e['pid']} "
                                    f"at {e['ts']} us, not after {last[0]} ns")
                counters[track] = (ns(e["ts"]), counters.get(track, (0, 0))[1] + 1)
        elif ph in "stf":
            flow = v1.setdefault((e["cat"], e["name"], str(e["id"])), {"s": [], "t": [], "f": []})
            flow[ph].append((ns(e["ts"]), i))
        if "bind_id" in e and (e.get("flow_out") or e.get("flow_in")):
            flow = v2.setdefault(str(e["bind_id"]), {"out": [], "in": []})
            if e.get("flow_out"):
                flow["out"].append((ns(e["ts"]), i))
            if e.get("flow_in"):
                flow["in"].append((ns(e["ts"]), i))
    for (pid, tid), stack in open_b.items():
        if stack:
            raise Violation(f"event {stack[-1]} (B): never ended on pid {pid} tid {tid}")
    check_nesting(slices)
    for key, flow in v1.items():
        if len(flow["s"]) != 1 or len(flow["f"]) != 1:
            raise Violation(f"flow {key}: {len(flow['s'])} starts and {len(flow['f'])} ends, "
                            "expected one of each")
        if flow["f"][0][0] < flow["s"][0][0]:
            raise Violation(f"flow {key}: ends (event {flow['f'][0][1]}) before it starts")
    for key, flow in v2.items():
        if len(flow["out"]) != 1 or len(flow["in"]) != 1:
            raise Violation(f"flow bind_id {key}: {len(flow['out'])} flow_out and "
                            f"{len(flow['in'])} flow_in slices, expected one of each")
        if flow["in"][0][0] < flow["out"][0][0]:
            raise Violation(f"flow bind_id {key}: its flow_in slice (event {flow['in'][0][1]}) "
                            f"starts before its flow_out slice (event {flow['out'][0][1]})")
    if require_names:
        for pid in sorted(used_pids - named_pids, key=str):
            raise Violation(f"pid {pid} has events but no process_name")
        for pid, tid in sorted(used_threads - named_threads, key=str):
            if tid is not None:
                raise Violation(f"pid {pid} tid {tid} has slices but no thread_name")
    order = sorted(process_names, key=lambda p: (sort_index.get(p, p), p))
    return {
        "events": len(events),
        "slices": sum(len(v) for v in slices.values()),
        "flows": len(v1) + len(v2),
        "processes": [process_names[p] for p in order],
        "counter_tracks": sorted(f"{pid}/{name}/{arg}" for pid, name, arg in counters),
        "counter_samples": sum(n for _, n in counters.values()),
    }


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__.strip().splitlines()[-4])
        sys.exit(2)
    path = args[0]
    try:
        stats = check(load(path), require_names="--require-names" in args)
    except Violation as v:
        print(f"check_trace: {path}: {v}")
        sys.exit(1)
    if "--stats" in args:
        print(json.dumps(stats))
    else:
        print(f"check_trace: {path}: {stats['events']} events, {stats['slices']} slices, "
              f"{stats['flows']} flows, {len(stats['processes'])} processes, "
              f"{len(stats['counter_tracks'])} counter tracks: ok")


if __name__ == "__main__":
    main()
