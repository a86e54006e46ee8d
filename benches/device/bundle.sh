#!/usr/bin/env bash
# Builds the device bundle of the GPU bench (docs/src/benchmarks/gpu.md): the stripped bench
# binaries (gpu_bench, and ipc_solvers for the contact part), the meshes and scenes they read
# and run.sh, in one directory (default target/gpu-bench-bundle), checked to be under 64 MiB.
# Run from the repository root on a machine with the toolchain.
set -euo pipefail
out=${1:-target/gpu-bench-bundle}
meshes=${JELLO_MESH_DIR:-../shared/meshes}
rm -rf "$out" && mkdir -p "$out/meshes" "$out/scenes"
# Release builds of the bench targets; cargo prints each executable's path.
for b in gpu_bench ipc_solvers; do
  exe=$(cargo bench --bench "$b" --no-run --message-format=json 2>/dev/null \
    | sed -n "s/.*\"executable\":\"\([^\"]*$b[^\"]*\)\".*/\1/p" | tail -1)
  [ -n "$exe" ] || { echo "bundle.sh: no $b executable from cargo bench --no-run" >&2; exit 1; }
  cp "$exe" "$out/$b"
  strip "$out/$b"
done
# The contact part's scenes, and the floor mesh the house of cards reads (../meshes/floor.obj).
cp assets/scenes/contact_stack.toml assets/scenes/house_of_cards.toml "$out/scenes/"
cp assets/meshes/floor.obj "$out/meshes/"
for m in armadillo_18k armadillo_114k; do
  if [ -f "$meshes/$m.node" ]; then
    cp "$meshes/$m.node" "$meshes/$m.ele" "$out/meshes/"
  else
    echo "bundle.sh: $meshes/$m.node absent; the bench will skip $m" >&2
  fi
done
cp benches/device/run.sh "$out/run.sh"
size=$(du -sm "$out" | cut -f1)
echo "bundle: $out ($size MiB)"
[ "$size" -lt 64 ] || { echo "bundle.sh: $size MiB is over the 64 MiB budget" >&2; exit 1; }
