# Helpers shared by the command-line tests (sourced, not run: ctest runs tests/cli/*.sh only).
# The sourcing script sets `failed=0` first; a helper that sees a mismatch prints it and sets
# failed=1.

# expect_failure EXPECTED COMMAND [ARGS...]: COMMAND exits with status 2 and prints exactly the
# line EXPECTED on stderr.
expect_failure() {
  local expected="$1" err status
  shift
  err=$("$@" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 2 ]; then
    echo "FAIL $*: exit status $status, expected 2"
    failed=1
  fi
  if [ "$err" != "$expected" ]; then
    printf 'FAIL %s:\n  got:      %s\n  expected: %s\n' "$*" "$err" "$expected"
    failed=1
  fi
}

# rail_study_head SRC [NAME]: the first lines of a study file — `kind`, `name: NAME` when given,
# a small rail-optimized cluster "rail" and the workload "llama" (Llama-2-7B on H100, files
# under SRC/workloads). The caller appends the workload's options and the sweep.
rail_study_head() {
  echo "kind: study"
  [ $# -ge 2 ] && echo "name: $2"
  cat <<YAML
topologies:
  rail:
    kind: rail_optimized
    gpus_per_node: 8
    nodes_per_leaf: 2
    spines: 2
    nvlink_bandwidth: 450 GB/s
    nvlink_latency: 0.5 us
    nic_bandwidth: 50 GB/s
    nic_latency: 1 us
    spine_bandwidth: 50 GB/s
    spine_latency: 1 us
workloads:
  llama:
    model: $1/workloads/models/llama2-7b.yaml
    accelerator: $1/workloads/accelerators/h100-sxm.yaml
YAML
}
