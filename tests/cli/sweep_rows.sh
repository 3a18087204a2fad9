#!/usr/bin/env bash
# `nest sweep` end to end on a small study: one row per point in point order, failing points as
# rows with their error (bad generator parameter, budget above the topology, infeasible), a
# replayed point; the same bytes for 1 and 2 threads; an interrupted sweep (--stop-after, and a
# real SIGKILL) resumes to the same bytes; the HDF5 table holds the CSV's values; the progress
# bar. Usage: sweep_rows.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }
# shellcheck source=lib/common.sh
source "$src/tests/cli/lib/common.sh"

{
  rail_study_head "$src" rows
  cat <<YAML
    micro_batches: [1]
sweep:
  points:
    - {devices: 16, topology.nvlink_bandwidth: 0 GB/s}
    - {devices: 64, topology.nodes: 2}
    - {devices: 1}
    - {devices: 16, replay: true}
    - {devices: 32, topology.nic_bandwidth: 12.5 GB/s, spine_oversubscription: 4}
    - {devices: 32, topology.nic_bandwidth: 50 GB/s}
YAML
} >"$tmp/s.yaml"

# --dry-run lists the expanded points and runs nothing.
out=$("$nest" sweep "$tmp/s.yaml" --output "$tmp/dry" --dry-run)
[ "$(echo "$out" | head -1)" = "study rows: 6 points" ] || fail "dry run: $out"
[ "$(echo "$out" | sed -n 2p)" = "point,topology,workload,devices,rules,replay,spine_oversubscription,seed,topology.nvlink_bandwidth,topology.nodes,topology.nic_bandwidth" ] ||
  fail "dry run header: $(echo "$out" | sed -n 2p)"
[ "$(echo "$out" | sed -n 7p)" = "4,rail,llama,32,megatron,false,4,0,450 GB/s,,12.5 GB/s" ] ||
  fail "dry run point 4: $(echo "$out" | sed -n 7p)"
[ -e "$tmp/dry" ] && fail "a dry run created the output folder"

run() { "$nest" sweep "$tmp/s.yaml" --progress never "$@" >/dev/null || fail "sweep $*"; }
run --output "$tmp/a"
csv="$tmp/a/results.csv"
[ "$(wc -l <"$csv")" -eq 7 ] || fail "expected a header and 6 rows: $(wc -l <"$csv")"
[ "$(cut -d, -f1 "$csv" | tr '\n' ' ')" = "point 0 1 2 3 4 5 " ] || fail "rows out of order"
line() { sed -n "$(($1 + 2))p" "$csv"; }
line 0 | grep -qF ',error,"topology.nvlink_bandwidth: must be positive (got ""0 GB/s""; expected a bandwidth > 0)",' ||
  fail "bad generator parameter row: $(line 0)"
line 1 | grep -qF ',error,"devices: the topology has only 16 devices (got ""64""; ' ||
  fail "budget row: $(line 1)"
line 2 | grep -qF ',infeasible,"nothing fits on 1 devices' || fail "infeasible row: $(line 2)"
for p in 3 4 5; do line $p | grep -q ',ok,,' || fail "row $p not ok: $(line $p)"; done

/usr/bin/python3 - "$tmp/a" "$src" "$tmp/s.yaml" <<'PY' || fail "CSV and HDF5 disagree"
import csv, math, sys
import h5py
sys.path.insert(0, sys.argv[2] + "/scripts")
import nest_h5
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/results.csv")))
with h5py.File(d + "/results.h5") as f:
    t = nest_h5.results(f)
    units = nest_h5.units(f["/results"])
    dtype = f["/results"].dtype
    # Text is UTF-8: attributes come back as str without decoding.
    assert f.attrs["study_name"] == "rows", f.attrs["study_name"]
    assert h5py.check_string_dtype(dtype["topology"]).encoding == "utf-8"
    assert nest_h5.study(f)["text"] == open(sys.argv[3]).read()
assert units["iteration_s"] == "s"
assert list(t) == list(rows[0].keys()), (list(t), rows[0].keys())
assert len(rows) == 6 and all(len(v) == 6 for v in t.values())
# Numeric axes are numbers: plain ones as they are, quantities in SI units; missing is -1.
assert dtype["devices"].kind == "i" and list(t["devices"]) == [16, 64, 1, 16, 32, 32]
assert dtype["seed"].kind == "i" and dtype["topology.nodes"].kind == "i"
assert list(t["spine_oversubscription"]) == [-1, -1, -1, -1, 4, -1], t["spine_oversubscription"]
assert units["topology.nic_bandwidth"] == "B/s" and dtype["topology.nic_bandwidth"].kind == "f"
assert list(t["topology.nic_bandwidth"]) == [50e9, 50e9, 50e9, 50e9, 12.5e9, 50e9]
assert list(t["topology.nvlink_bandwidth"]) == [0.0] + [450e9] * 5
axes = {"devices", "seed", "spine_oversubscription", "topology.nodes", "topology.nic_bandwidth",
        "topology.nvlink_bandwidth"}
for i, r in enumerate(rows):
    for k, column in t.items():
        v = column[i]
        if k in axes:
            assert (v == -1 and r[k] == "") or units.get(k) or float(r[k]) == v, (k, v, r[k])
        elif isinstance(v, str):
            assert v == r[k], (k, v, r[k])
        elif column.dtype.kind == "f":
            assert (math.isnan(v) and r[k] == "") or float(r[k]) == v, (k, v, r[k])
        else:
            assert (v == -1 and r[k] == "") or int(r[k]) == v, (k, v, r[k])
replayed = rows[3]
assert replayed["replay"] == "true" and float(replayed["replay_iteration_s"]) > 0
assert abs(float(replayed["replay_error"])) < 0.05, replayed["replay_error"]
PY

# The charts and the summary of scripts/plot_sweep.py.
/usr/bin/python3 "$src/scripts/plot_sweep.py" "$tmp/a" --facets devices --series replay \
  --out "$tmp/plots" >/dev/null || fail "plot_sweep.py"
for f in throughput speedup replay; do
  [ "$(head -c 4 "$tmp/plots/$f.png" | tail -c 3)" = "PNG" ] || fail "no $f.png"
done
grep -qx '6 points: 3 ok, 1 infeasible, 2 error.' "$tmp/plots/summary.md" ||
  fail "summary: $(tail -4 "$tmp/plots/summary.md")"
[ "$(grep -c '^| rail | 32 | false | ' "$tmp/plots/summary.md")" -eq 2 ] || fail "summary rows"

run --output "$tmp/b" --threads 2
cmp -s "$csv" "$tmp/b/results.csv" || fail "CSV differs with 2 threads"
cmp -s "$tmp/a/results.h5" "$tmp/b/results.h5" || fail "HDF5 differs with 2 threads"

out=$("$nest" sweep "$tmp/s.yaml" --output "$tmp/c" --stop-after 2 --progress never)
# Dispatch is largest cost first: point 1 (64 devices, an error row), then point 3 (replay).
echo "$out" | grep -q '^rows: 1 ok, 0 infeasible, 1 error (incomplete: --resume continues)$' ||
  fail "stop-after report: $out"
[ "$(cut -d, -f1 "$tmp/c/results.csv" | tr '\n' ' ')" = "point 1 3 " ] ||
  fail "stop-after 2 wrote points $(cut -d, -f1 "$tmp/c/results.csv" | tr '\n' ' ')"
out=$("$nest" sweep "$tmp/s.yaml" --output "$tmp/c" --resume --progress never)
echo "$out" | grep -q '^sweep rows: 6 points, 2 resumed, 4 evaluated on 1 process x 1 thread in ' ||
  fail "resume report: $out"
cmp -s "$csv" "$tmp/c/results.csv" || fail "resumed CSV differs"
cmp -s "$tmp/a/results.h5" "$tmp/c/results.h5" || fail "resumed HDF5 differs"

# A real kill: two larger points (dispatched first), killed once the first one's row is
# written; whatever was written is whole, and --resume completes it to the same bytes.
cp "$tmp/s.yaml" "$tmp/k.yaml"
printf '    - {devices: 256, seed: 1}\n    - {devices: 256, seed: 2}\n' >>"$tmp/k.yaml"
"$nest" sweep "$tmp/k.yaml" --output "$tmp/k-full" --progress never >/dev/null || fail "k study"
"$nest" sweep "$tmp/k.yaml" --output "$tmp/k" --progress never >/dev/null &
pid=$!
for _ in $(seq 1000); do
  [ -f "$tmp/k/results.csv" ] && [ "$(wc -l <"$tmp/k/results.csv")" -ge 2 ] && break
  sleep 0.01
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
rows=$(($(wc -l <"$tmp/k/results.csv") - 1))
[ "$rows" -ge 1 ] && [ "$rows" -lt 8 ] || fail "the kill did not interrupt the sweep ($rows rows)"
/usr/bin/python3 - "$tmp/k/results.csv" <<'PY' || fail "killed sweep left a broken CSV"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
assert all(len(r) == len(rows[0]) for r in rows), "a short row"
PY
touch "$tmp/k/results.h5.nest-tmp-0123456789abcdef"  # as a kill while writing would leave
"$nest" sweep "$tmp/k.yaml" --output "$tmp/k" --resume --progress never >/dev/null || fail "resume after kill"
cmp -s "$tmp/k-full/results.csv" "$tmp/k/results.csv" || fail "CSV after kill and resume differs"
cmp -s "$tmp/k-full/results.h5" "$tmp/k/results.h5" || fail "HDF5 after kill and resume differs"
ls -A "$tmp/k" | grep -q 'tmp\|lock' && fail "temporary or lock files left: $(ls -A "$tmp/k")"

# The progress bar, forced on: count, rate and time left on stderr.
err=$("$nest" sweep "$tmp/s.yaml" --output "$tmp/p" --progress always 2>&1 >/dev/null)
echo "$err" | tr '\r' '\n' | grep -Eq '^sweep rows \[#{30}\] 6/6 [0-9.]+/s 0s left *$' ||
  fail "progress bar: $(echo "$err" | tr '\r' '\n' | tail -1)"
exit $failed
