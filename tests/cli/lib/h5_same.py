"""Exit 0 when two NEST run files hold the same groups, datasets and attributes, all but the
command line and the input paths as typed (meta); else print what differs and exit 1.

Usage: /usr/bin/python3 h5_same.py A.h5 B.h5
"""
import sys

import h5py
import numpy as np

SKIP = {("meta", "command_line"), ("meta", "input_paths")}


def same(x, y):
    return np.array_equal(np.asarray(x), np.asarray(y))


def main(path_a, path_b):
    a, b = h5py.File(path_a, "r"), h5py.File(path_b, "r")
    bad = []

    def walk(name, obj):
        other = b.get(name)
        if other is None:
            bad.append(f"{name} missing")
            return
        for key, value in obj.attrs.items():
            if (name, key) in SKIP:
                continue
            if key not in other.attrs or not same(value, other.attrs[key]):
                bad.append(f"{name}@{key} differs")
        if isinstance(obj, h5py.Dataset) and not same(obj[()], other[()]):
            bad.append(f"{name} differs")

    a.visititems(walk)
    if sorted(a.keys()) != sorted(b.keys()):
        bad.append("top-level groups differ")
    if bad:
        print("FAIL run.h5:", "; ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
