#!/usr/bin/env bash
# `nest collective` on a non-blocking switch of 8 devices (100 GB/s = 10 ps per byte, 0.5 us
# per cable): a ring allreduce of 8 MB takes 2(n-1)(a + S/(nB)) = 14 (1 us + 10 us) = 154 us,
# simulated and closed form alike; four concurrent 2-rank rings share nothing either; the text
# report names every figure (each link of a rank carries 2(n-1) = 14 chunks of 1 MB), and how
# it was computed (no flows ever share a link here, so without events).
# Usage: collective_output.sh <nest> <source-dir>
set -u
nest="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0

{
  echo "kind: explicit"
  echo "name: star8"
  echo "nodes:"
  for i in 0 1 2 3 4 5 6 7; do echo "  - {name: d$i, kind: device}"; done
  echo "  - {name: sw, kind: switch}"
  echo "links:"
  for i in 0 1 2 3 4 5 6 7; do echo "  - {a: d$i, b: sw, bandwidth: 100 GB/s, latency: 0.5 us}"; done
} >"$dir/star8.yaml"

check() {  # description, expected, actual
  if [ "$2" != "$3" ]; then
    printf 'FAIL %s:\n  got:      %s\n  expected: %s\n' "$1" "$3" "$2"
    failed=1
  fi
}

field() {  # json, key -> value (numbers and strings, no nesting)
  python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"
}

json=$("$nest" collective --topology "$dir/star8.yaml" --op allreduce --algorithm ring \
  --group 0-7 --size 8MB --json)
check "exit status" 0 $?
check simulated_s 0.000154 "$(field "$json" simulated_s)"
check closed_form_s 0.000154 "$(python3 -c "print(round($(field "$json" closed_form_s), 12))")"
check difference_s 0.0 "$(field "$json" difference_s)"
# algbw = S / t = 8e6 / 154e-6; busbw = algbw * 2(n-1)/n = algbw * 1.75.
check algbw "$(python3 -c 'print(8e6 / 154e-6)')" "$(field "$json" algbw_bytes_per_s)"
check busbw "$(python3 -c 'print(8e6 / 154e-6 * 1.75)')" "$(field "$json" busbw_bytes_per_s)"
check flows 112 "$(field "$json" flows)"
check method "contention-free evaluation" "$(field "$json" method)"
# --events: the event simulation, same figures.
json=$("$nest" collective --topology "$dir/star8.yaml" --op allreduce --algorithm ring \
  --group 0-7 --size 8MB --events --json)
check "--events method" "event simulation" "$(field "$json" method)"
check "--events simulated_s" 0.000154 "$(field "$json" simulated_s)"
check "--events events" 224 "$(field "$json" events)"

# Direct all-to-all: each rank's 7 flows leave together over its one cable, so the event
# simulation answers: 1 us + 7 x 1e6 B x 10 ps = 71 us.
json=$("$nest" collective --topology "$dir/star8.yaml" --op all_to_all --algorithm direct \
  --size 8MB --json)
check "direct all_to_all method" "event simulation" "$(field "$json" method)"
check "direct all_to_all simulated_s" 7.1e-05 "$(field "$json" simulated_s)"

# Four 2-rank rings {0,1}, {2,3}, ... at once: 2 (1 us + 4e6 B x 10 ps) = 82 us each.
json=$("$nest" collective --topology "$dir/star8.yaml" --op allreduce --group 0-1 --size 8MB \
  --concurrent stride:2 --json)
check "concurrent groups" 4 "$(field "$json" groups)"
check "concurrent simulated_s" 8.2e-05 "$(field "$json" simulated_s)"

# All-to-all, 8 MB per rank, pairwise: 7 steps of (1 us + 1e6 B x 10 ps) = 77 us.
json=$("$nest" collective --topology "$dir/star8.yaml" --op all_to_all --size 8MB --json)
check "all_to_all simulated_s" 7.7e-05 "$(field "$json" simulated_s)"
check "all_to_all algorithm" pairwise "$(field "$json" algorithm)"

text=$("$nest" collective --topology "$dir/star8.yaml" --op allreduce --group 0-7 --size 8MB \
  --links 2)
check "text exit status" 0 $?
expected='collective:  allreduce ring, 8 ranks (0-7), 7.629 MiB
topology:    star8 (explicit, 8 devices)
simulated:   154 us
closed form: 154 us (14 steps: latency 14 us + bandwidth 140 us; bottleneck 100 GB/s)
difference:  +0 s (+0.00%, equal within rounding)
algbw:       51.95 GB/s
busbw:       90.91 GB/s
flows:       112 (224 events, contention-free evaluation)
busiest links:
  d0 -> sw                            13.35 MiB  busy 140 us  peak 1 flows
  sw -> d0                            13.35 MiB  busy 140 us  peak 1 flows'
check "text report" "$expected" "$text"

# A sweep in nccl-tests' notation: 1, 2 and 4 MiB in one process. Each size S is a ring of
# 2(n-1) = 14 steps of (1 us + S/8 x 10 ps); count is S / 4 (float elements, as nccl-tests).
csv=$("$nest" collective --topology "$dir/star8.yaml" --op allreduce --sizes 1M:4M --csv)
check "sweep exit status" 0 $?
check "sweep csv" "ok" "$(python3 -c '
import csv, io, sys
rows = list(csv.DictReader(io.StringIO(sys.argv[1])))
sizes = [1 << 20, 2 << 20, 4 << 20]
assert [int(r["size_bytes"]) for r in rows] == sizes, rows
for r, s in zip(rows, sizes):
    t = 14 * (1e-6 + s / 8 * 1e-11)
    assert abs(float(r["time_s"]) - t) < 1e-15, (r, t)
    assert abs(float(r["closed_form_s"]) - t) < 1e-15, (r, t)
    assert float(r["difference_s"]) == 0, r
    assert int(r["count"]) == s // 4, r
    assert abs(float(r["busbw_bytes_per_s"]) - s / t * 1.75) < 1e-3 * s / t, r
    assert r["algorithm"] == "ring" and r["method"] == "contention-free", r
print("ok")' "$csv")"
json=$("$nest" collective --topology "$dir/star8.yaml" --op all_gather --sizes 8K:64K:8 --json)
check "sweep json rows" "8192 65536" "$(python3 -c '
import json, sys
print(" ".join(str(r["size_bytes"]) for r in json.loads(sys.argv[1])["rows"]))' "$json")"
# all_gather counts one rank's part: 8192 B / 4 / 8 ranks = 256 floats.
check "sweep json count" 256 "$(python3 -c '
import json, sys; print(json.loads(sys.argv[1])["rows"][0]["count"])' "$json")"
text=$("$nest" collective --topology "$dir/star8.yaml" --op allreduce --sizes 1M:2M)
expected='collective:  allreduce ring, 8 ranks (0-7), sizes 1M:2M (2 sizes)
topology:    star8 (explicit, 8 devices)
model:       ideal (line rates and latencies of the topology)
      size (B)        count        algorithm  proto    time (us) algbw (GB/s) busbw (GB/s)  closed (us) difference
       1048576       262144             ring      -        32.35        32.41        56.72        32.35     +0.00%
       2097152       524288             ring      -        50.70        41.36        72.39        50.70     +0.00%'
check "sweep text" "$expected" "$text"

# A collective model inline: Simple at 80% of the line rate, 2 us per link, 10 us per
# collective. Ring allreduce of 8 MB: 10 us + 14 x (4 us + 1 MB at 80 GB/s) = 241 us, simulated
# and closed form alike; --ideal ignores the model (154 us, as above).
{
  cat "$dir/star8.yaml"
  echo "collectives:"
  echo "  name: eighty"
  echo "  protocols:"
  echo "    Simple: {base_latency: 10 us, scale_up: {efficiency: 0.8, latency: 2 us}}"
} >"$dir/star8-model.yaml"
json=$("$nest" collective --topology "$dir/star8-model.yaml" --op allreduce --algorithm ring \
  --size 8MB --json)
check "calibrated simulated_s" 0.000241 "$(field "$json" simulated_s)"
check "calibrated closed_form_s" 0.000241 "$(python3 -c "print(round($(field "$json" closed_form_s), 12))")"
check "calibrated protocol" Simple "$(field "$json" protocol)"
check "calibrated base latency" 1e-05 "$(python3 -c "print(round($(field "$json" base_latency_s), 12))")"
check "calibrated model" eighty "$(field "$json" model)"
json=$("$nest" collective --topology "$dir/star8-model.yaml" --op allreduce --size 8MB --ideal \
  --json)
check "--ideal simulated_s" 0.000154 "$(field "$json" simulated_s)"
check "--ideal algorithm" ring "$(field "$json" algorithm)"
# Under the model the default algorithm is the tuner's choice (the ring: no other candidate
# applies on one switch without in-switch reduction).
json=$("$nest" collective --topology "$dir/star8-model.yaml" --op allreduce --size 8MB --json)
check "tuned" True "$(field "$json" tuned)"
check "tuned algorithm" ring "$(field "$json" algorithm)"

# The sweep's CSV draws against a measured curve (scripts/plot_collective.py).
"$nest" collective --topology "$dir/star8.yaml" --op allreduce --sizes 8:16G:4 --csv >"$dir/sweep.csv"
/usr/bin/python3 "$2/scripts/plot_collective.py" \
  "$2/tests/validation/reference/measured/nccl-allreduce-dgx-h100.tsv" "$dir/sweep.csv" \
  "$dir/sweep.png" --ideal "$dir/sweep.csv"
check "plot status" 0 $?
[ -s "$dir/sweep.png" ] || { echo "FAIL plot_collective.py wrote no PNG"; failed=1; }
check "plot of a non-sweep" "plot_collective.py: $dir/star8.yaml: not \`nest collective --sizes ... --csv\` output" \
  "$(/usr/bin/python3 "$2/scripts/plot_collective.py" \
    "$2/tests/validation/reference/measured/nccl-allreduce-dgx-h100.tsv" "$dir/star8.yaml" \
    "$dir/x.png" 2>&1)"

exit $failed
