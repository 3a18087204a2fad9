#!/usr/bin/env bash
# Installs the Debian packages NEST needs to build, test and plot, and any named as arguments
# (scripts/test.sh --sanitize adds clang and libclang-rt-14-dev). Idempotent and quiet when
# everything is already there. Run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ccache clang-format
  libboost-graph-dev libboost-program-options-dev libboost-mpi-dev libopenmpi-dev openmpi-bin
  libyaml-cpp-dev libhdf5-dev libfmt-dev libspdlog-dev nlohmann-json3-dev zlib1g-dev
  libprotobuf-dev protobuf-compiler python3-protobuf
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-h5py python3-matplotlib python3-pandas
  python3-dev python3-pybind11 pybind11-dev
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
