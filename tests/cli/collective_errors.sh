#!/usr/bin/env bash
# `nest collective` with bad groups, sizes, operations and algorithms: exit status 2 and one
# exact line on stderr. Usage: collective_errors.sh <nest> <source-dir>
set -u
nest="$1"
topo="$2/topologies/small_explicit.yaml"  # 4 devices
failed=0

# shellcheck source=lib/common.sh
source "$2/tests/cli/lib/common.sh"
expect_error() {  # expected stderr line, then the arguments after `nest collective`
  local expected="$1"
  shift
  expect_failure "$expected" "$nest" collective --topology "$topo" "$@"
}

syntax='expected devices and ranges separated by commas, e.g. 0-7,16-23'
expect_error 'nest collective: --group: device out of range (got "4"; expected devices 0-3)' \
  --op allreduce --size 1MiB --group 0-4
expect_error 'nest collective: --group: device out of range (got "9"; expected devices 0-3)' \
  --op allreduce --size 1MiB --group 0,9
expect_error 'nest collective: --group: device listed twice (got "1"; expected distinct devices)' \
  --op allreduce --size 1MiB --group 0-2,1
expect_error "nest collective: --group: device range runs backwards (got \"3-1\"; $syntax)" \
  --op allreduce --size 1MiB --group 3-1
expect_error "nest collective: --group: malformed group (got \"0,,1\"; $syntax)" \
  --op allreduce --size 1MiB --group 0,,1
expect_error 'nest collective: --size: message size must be positive (got "0 B"; expected a size > 0, e.g. 1GiB)' \
  --op allreduce --size 0B
expect_error 'nest collective: --size: missing unit (got "100"; expected a size like "80 GiB" (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; b, Kb, Mb, Gb for bits))' \
  --op allreduce --size 100
expect_error 'nest collective: --op: unknown operation (got "gatherv"; expected allreduce, reduce_scatter, all_gather, all_to_all, broadcast, send, reduce, gather, scatter, sendrecv)' \
  --op gatherv --size 1MiB
expect_error 'nest collective: --algorithm: unknown algorithm (got "butterfly"; expected ring, tree, halving_doubling, direct, pairwise, hierarchical, torus, nvls)' \
  --op allreduce --algorithm butterfly --size 1MiB
expect_error 'nest collective: --algorithm: algorithm not valid for all_to_all (got "ring"; expected one of pairwise, direct)' \
  --op all_to_all --algorithm ring --size 1MiB
expect_error 'nest collective: --algorithm: algorithm not valid for broadcast (got "halving_doubling"; expected one of ring, tree, direct)' \
  --op broadcast --algorithm halving_doubling --size 1MiB
expect_error 'nest collective: --group: halving_doubling all_gather needs a power-of-two group (got "3 devices"; expected 1, 2, 4, 8, ... devices (allreduce also takes other sizes))' \
  --op all_gather --algorithm halving_doubling --size 1MiB --group 0-2
expect_error 'nest collective: --group: send needs a group of exactly two devices {source, destination} (got "3 devices"; expected 2 devices)' \
  --op send --size 1MiB --group 0-2
expect_error 'nest collective: --chunks: bad chunk count for pairwise (got "4"; expected 1 (only ring, tree, hierarchical and torus pipeline))' \
  --op all_to_all --size 1MiB --chunks 4
expect_error 'nest collective: --levels: level sizes must multiply to the group size (got "3"; expected a product of 4)' \
  --op allreduce --algorithm hierarchical --size 1MiB --levels 3
expect_error 'nest collective: --concurrent: copies of the group overlap at device 1 (got "stride:1"; expected none, stride:S or stride:S:K, e.g. stride:64)' \
  --op allreduce --size 1MiB --group 0-1 --concurrent stride:1
expect_error 'nest collective: --concurrent: copy 2 runs past the last device (5 >= 4) (got "stride:2:3"; expected none, stride:S or stride:S:K, e.g. stride:64)' \
  --op allreduce --size 1MiB --group 0-1 --concurrent stride:2:3

expect_error 'nest collective: --concurrent: no copy fits: the group shifted by 4 runs past the last device (6 >= 4) (got "stride:4"; expected none, stride:S or stride:S:K, e.g. stride:64)' \
  --op allreduce --size 1MiB --group 1-2 --concurrent stride:4
expect_error 'nest collective: --group: empty group (expected device ids and ranges, e.g. 0-7)' \
  --op allreduce --size 1MiB --group ''
expect_error 'nest collective: --levels: level sizes apply only to hierarchical and torus, not ring (got "2,2"; expected no --levels, or --algorithm hierarchical or torus)' \
  --op allreduce --size 1MiB --levels 2,2
# The smallest piece: size/(ranks·chunks) in a ring, size/(2·chunks) in a tree allreduce,
# size/chunks in a broadcast.
expect_error 'nest collective: --chunks: more pieces than bytes (got "26"; expected at most 25 for 100 B over 4 ranks (pieces of at least 1 B))' \
  --op allreduce --size 100B --chunks 26
expect_error 'nest collective: --chunks: more pieces than bytes (got "51"; expected at most 50 for 100 B in two trees (pieces of at least 1 B))' \
  --op allreduce --algorithm tree --size 100B --chunks 51
expect_error 'nest collective: --chunks: more pieces than bytes (got "101"; expected at most 100 for 100 B broadcast (pieces of at least 1 B))' \
  --op broadcast --size 100B --chunks 101
# A stored schedule numbers its transfers in 32 bits; the implicit ring program its steps.
expect_error 'nest collective: --chunks: collective too large to lower: 4800000000 transfers (got "400000000"; expected fewer than 2^32 transfers (a smaller group or fewer chunks))' \
  --op allreduce --algorithm tree --size 1TiB --chunks 400000000
expect_error 'nest collective: --chunks: collective too large to lower: 4800000000 steps (got "800000000"; expected fewer than 2^32 steps (a smaller group or fewer chunks))' \
  --op allreduce --size 1TiB --chunks 800000000
# 2^62 ps is 4.6e6 s; 1,000,000 TiB over any of this topology's links takes longer.
expect_error 'nest collective: --size: simulated time out of range (got "1000000TiB"; expected events within 2^62 ps (4.6e6 s) of simulated time: a smaller size or faster links)' \
  --op send --size 1000000TiB --group 0,1
expect_error 'nest collective: --size: simulated time out of range (got "1000000TiB"; expected events within 2^62 ps (4.6e6 s) of simulated time: a smaller size or faster links)' \
  --op send --size 1000000TiB --group 0,1 --events
expect_error 'nest collective: --size: quantity out of range (got "9223372036854775807B"; expected at most 9.2e18 B)' \
  --op allreduce --size 9223372036854775807B

# Sweeps: exactly one of --size and --sizes; --csv only for a sweep; a simulator range error
# names the size of the sweep that caused it.
expect_error 'nest collective: --size: give exactly one of --size and --sizes (expected --size SIZE (one collective) or --sizes MIN:MAX[:FACTOR])' \
  --op allreduce
expect_error 'nest collective: --sizes: give exactly one of --size and --sizes (expected --size SIZE (one collective) or --sizes MIN:MAX[:FACTOR])' \
  --op allreduce --size 1MiB --sizes 8:1M
expect_error 'nest collective: --sizes: the largest size is below the smallest (got "1M:8"; expected MIN:MAX[:FACTOR] as in nccl-tests -b/-e/-f, e.g. 8:4G:2 (K, M, G = 1024, 1024^2, 1024^3))' \
  --op allreduce --sizes 1M:8
expect_error 'nest collective: --csv: --csv prints a sweep (expected --sizes MIN:MAX[:FACTOR] with --csv)' \
  --op allreduce --size 1MiB --csv
expect_error 'nest collective: --csv: choose one output format (expected --csv or --json)' \
  --op allreduce --sizes 8:1M --csv --json
expect_error 'nest collective: --sizes: simulated time out of range (got "1152921504606846976 B"; expected events within 2^62 ps (4.6e6 s) of simulated time: a smaller size or faster links)' \
  --op send --sizes 1T:1048576T:1024 --group 0,1

# Algorithms and options the collective model brings.
expect_error 'nest collective: --algorithm: nvls needs the whole group on one NVLink SHARP switch (got "nvls"; expected a topology with nvlink_sharp: true (in-switch reduction))' \
  --op allreduce --algorithm nvls --size 1MiB --group 0-1
expect_error 'nest collective: --channels: bad channel count for allreduce tree (got "2"; expected 1 (only ring allreduce, reduce_scatter and all_gather run several rings))' \
  --op allreduce --algorithm tree --size 1MiB --channels 2
expect_error 'nest collective: --channels: bad channel count (got "0"; expected an integer >= 1)' \
  --op allreduce --size 1MiB --channels 0
expect_error 'nest collective: --levels: --levels fixes a hierarchical algorithm (got "2,2"; expected --algorithm hierarchical or torus with --levels)' \
  --op allreduce --algorithm auto --size 1MiB --levels 2,2
expect_error 'nest collective: --algorithm: algorithm not valid for gather (got "ring"; expected one of direct)' \
  --op gather --algorithm ring --size 1MiB

exit $failed
