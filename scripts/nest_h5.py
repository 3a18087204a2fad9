"""Reading NEST run files (HDF5, schema in README.md "HDF5 output") for the plot scripts.

Uses Debian's python3-h5py and python3-numpy: run with /usr/bin/python3.
"""
import h5py
import numpy as np

PS_PER_S = 1e12


def enum_names(dataset, field):
    """Maps the integer values of an HDF5 enum field to their names."""
    mapping = h5py.check_enum_dtype(dataset.dtype[field])
    return {value: name for name, value in mapping.items()}


def timeline(f):
    """Rows of /timeline as numpy arrays, times in seconds, kinds and streams as names."""
    ds = f["/timeline"]
    rows = ds[()]
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
    ds = f["/memory/trace"]
    rows = ds[()]
    categories = enum_names(ds, "category")
    return {
        "device": rows["device"],
        "time": rows["time"] / PS_PER_S,
        "bytes": rows["bytes"].astype(np.float64),
        "category": np.array([categories[c] for c in rows["category"]]),
    }
