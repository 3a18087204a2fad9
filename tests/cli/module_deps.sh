#!/usr/bin/env bash
# The module map holds: every module's sources and public headers include only headers of the
# modules it declares in cmake/modules.cmake (directly or through their declared dependencies),
# so that CMake's dependencies are the includes and no module reaches above itself. Fails naming
# the file, the line and the undeclared module.
# Usage: module_deps.sh <nest> <source-dir>
set -u
cd "$2" || exit 1
/usr/bin/python3 - <<'PY'
import os, re, sys
text = open("cmake/modules.cmake").read()
deps = {}
for m in re.finditer(r"nest_add_module\((\w+)([^)]*)\)", text):
    name, rest = m.group(1), m.group(2)
    declared = re.search(r"DEPS((?:\s+[\w:]+)*)", rest)
    names = declared.group(1).split() if declared else []
    deps[name] = [d[len("nest_"):] for d in names if d.startswith("nest_")]
if not deps:
    print("FAIL no modules found in cmake/modules.cmake"); sys.exit(1)

def closure(m, seen=None):
    seen = set() if seen is None else seen
    for d in deps.get(m, []):
        if d not in seen:
            seen.add(d)
            closure(d, seen)
    return seen

bad = []
include = re.compile(r'#include\s+"nest/(\w+)/')
for m in deps:
    allowed = closure(m) | {m}
    for folder in (f"src/{m}", f"include/nest/{m}"):
        if not os.path.isdir(folder):
            continue
        for root, _, files in os.walk(folder):
            for f in sorted(files):
                if not f.endswith((".cc", ".h")):
                    continue
                path = os.path.join(root, f)
                for number, line in enumerate(open(path, encoding="utf-8"), 1):
                    hit = include.search(line)
                    if hit and hit.group(1) not in allowed:
                        bad.append(f"{path}:{number}: module {m} includes nest/{hit.group(1)}/ "
                                   f"but declares only {sorted(allowed - {m})}")
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
PY
