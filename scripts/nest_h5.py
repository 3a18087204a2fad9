"""Reading NEST's HDF5 files: run files (schema in README.md "HDF5 output") and a sweep's
results.h5 (include/nest/sweep/table.h), for the plot scripts and notebooks.

Strings are variable-length UTF-8: h5py gives attributes as str and datasets as bytes (its rule
for every variable-length string dataset, compound members included); the readers below decode
them, so callers see str. Uses Debian's python3-h5py and python3-numpy: run with /usr/bin/python3.
"""
import h5py
import numpy as np

PS_PER_S = 1e12


def text(value):
    """A str from an HDF5 string: str as is, bytes decoded as UTF-8 (files written before the
    strings became UTF-8 hold fixed-length ASCII, which decodes the same)."""
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8")
    return str(value)


def meta(f):
    """The /meta group of a run file as a dict of str (input_paths, input_hashes: lists).
    plan_yaml is a dataset (a plan's text can pass HDF5's 64 KiB attribute limit); files written
    before held it as an attribute, which is read too."""
    g = f["/meta"]
    out = {key: text(g.attrs[key]) for key in ("tool_version", "command_line")}
    out["plan_yaml"] = text(g["plan_yaml"][()]) if "plan_yaml" in g else text(g.attrs["plan_yaml"])
    for key in ("input_paths", "input_hashes"):
        out[key] = [text(v) for v in g.attrs[key]]
    return out


def results(f):
    """The /results table of a sweep's results.h5 as a dict column -> numpy array: numbers as
    int64/float64 (missing: -1 / NaN), text as str (missing: ""). Numeric axes are numbers in
    the unit of their `<column>.unit` attribute (B, s, B/s); units() lists them."""
    rows = f["/results"][()]
    out = {}
    for name in rows.dtype.names:
        column = rows[name]
        if column.dtype.kind in "OSU":
            column = np.array([text(v) for v in column], dtype=object)
        out[name] = column
    return out


def units(dataset):
    """The `<column>.unit` attributes of a dataset as a dict column -> unit."""
    return {k[: -len(".unit")]: text(v) for k, v in dataset.attrs.items() if k.endswith(".unit")}


def study(f):
    """The study of a results.h5: name, file and text (the text is the /study_text dataset)."""
    return {"name": text(f.attrs["study_name"]), "file": text(f.attrs["study_file"]),
            "text": text(f["/study_text"][()]), "tool_version": text(f.attrs["tool_version"])}


def enum_names(dataset, field):
    """Maps the integer values of an HDF5 enum field to their names."""
    mapping = h5py.check_enum_dtype(dataset.dtype[field])
    return {value: name for name, value in mapping.items()}


def expanded_rows(f, name):
    """The raw rows of /timeline or /memory/trace for every device, sorted by device. A run file
    holds the rows of one device per timeline class (devices whose rows are equal but for the
    device id) unless written with --all-devices; /timeline_classes names, for each device,
    the device whose rows it has. Files without /timeline_classes hold every device already."""
    rows = f[name][()]
    if "timeline_classes" not in f:
        return rows
    classes = f["/timeline_classes"][()]
    if (classes["device"] == classes["representative"]).all():
        return rows
    rows = rows[np.argsort(rows["device"], kind="stable")]
    first = np.searchsorted(rows["device"], classes["representative"], "left")
    last = np.searchsorted(rows["device"], classes["representative"], "right")
    index = np.concatenate([np.arange(a, b) for a, b in zip(first, last)] + [np.arange(0)])
    out = rows[index.astype(np.int64)].copy()
    out["device"] = np.repeat(classes["device"], last - first)
    return out


def timeline(f):
    """Rows of /timeline for every device (expanded_rows) as numpy arrays, times in seconds,
    kinds and streams as names."""
    ds = f["/timeline"]
    rows = expanded_rows(f, "/timeline")
    kinds = enum_names(ds, "kind")
    streams = enum_names(ds, "stream")
    return {
        "device": rows["device"],
        "stage": rows["stage"],
        "microbatch": rows["microbatch"],
        "kind": np.array([kinds[k] for k in rows["kind"]]),
        "stream": np.array([streams[s] for s in rows["stream"]]),
        "start": rows["start"] / PS_PER_S,
        "end": rows["end"] / PS_PER_S,
    }


def memory_trace(f):
    """Rows of /memory/trace for every device (expanded_rows), times in seconds."""
    ds = f["/memory/trace"]
    rows = expanded_rows(f, "/memory/trace")
    categories = enum_names(ds, "category")
    return {
        "device": rows["device"],
        "time": rows["time"] / PS_PER_S,
        "bytes": rows["bytes"].astype(np.float64),
        "category": np.array([categories[c] for c in rows["category"]]),
    }


def topology(f):
    """The topology of a run file: {"name", "nodes", "links"}, the tables as numpy arrays.
    nodes: id, name (str), kind ("device"/"switch"), tier; links (directed, link id = row):
    src, dst (node ids), bandwidth (B/s), latency (s). None for files written before the
    tables existed."""
    if "topology" not in f:
        return None
    g = f["/topology"]
    nodes = g["nodes"]
    rows = nodes[()]
    kinds = enum_names(nodes, "kind")
    links = g["links"][()]
    return {
        "name": text(g.attrs["name"]),
        "nodes": {
            "id": rows["id"],
            "name": np.array([text(v) for v in rows["name"]], dtype=object),
            "kind": np.array([kinds[k] for k in rows["kind"]], dtype=object),
            "tier": rows["tier"],
        },
        "links": {
            "src": links["src"],
            "dst": links["dst"],
            "bandwidth": links["bandwidth"],
            "latency": links["latency"] / PS_PER_S,
        },
    }


def link_use(f):
    """/links (the directed links that carried bytes) with their ends named: src, dst (ids),
    src_name, dst_name, bytes, busy (s), utilization."""
    rows = f["/links"][()]
    t = topology(f)
    names = t["nodes"]["name"] if t is not None else None
    name = (lambda i: names[i]) if names is not None else (lambda i: str(i))
    return {
        "src": rows["src"],
        "dst": rows["dst"],
        "src_name": np.array([name(i) for i in rows["src"]], dtype=object),
        "dst_name": np.array([name(i) for i in rows["dst"]], dtype=object),
        "bytes": rows["bytes"],
        "busy": rows["busy"] / PS_PER_S,
        "utilization": rows["utilization"],
    }
