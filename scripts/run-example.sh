#!/usr/bin/env bash
# The main job on bundled inputs. Until the placer and the replay exist (issues 5 and 6), the
# main job describes every bundled interconnect.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
for f in topologies/*.yaml; do
  build/nest topology describe "$f"
  echo
done
