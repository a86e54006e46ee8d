#!/usr/bin/env bash
# Runs the GPU bench from a bundle made by bundle.sh, on a machine with a GPU and no Rust
# toolchain: `./run.sh [--quick|--whole] [OUT_DIR]` from the bundle's directory (or anywhere:
# it finds its own). Needs a Vulkan (or Metal/DX12/GL) loader and driver.
#
# Default: the bench in parts, most wanted first, each under its own time limit so the whole
# run stays under 8 minutes and every finished part is kept (a GPU lease can end mid-run):
# OUT_DIR/<part>/gpu-bench.{md,json}, all tables in OUT_DIR/gpu-bench.md, the log (each row as
# it finishes, the subspace build's time) in OUT_DIR/log.txt. Part limits are from the first
# H200 run (2026-11-30); JELLO_PART_SCALE multiplies them (e.g. 2 on a slower GPU).
# The part "contact" runs the IPC bench (ipc_solvers: JGS2 and VBD on the device against
# Newton-IPC on the CPU) on the stack of cubes at 18k tets after Newton's 10 warm-up steps, then
# device JGS2 alone on the house of cards ×8 (270k tets, 52k vertices) from the scene's start:
# OUT_DIR/contact/ipc_solvers.{md,json}, each step as a 'step:' line of the log. JGS2 on the
# 1M-tet box is not a part: its subspace precompute took over 150 s on the H200 machine's CPU
# (run it with --whole, or JELLO_BENCH_CASES=box_1m JELLO_BENCH_SOLVERS=jgs2 ./gpu_bench).
# JELLO_PARTS=name,name runs only the parts named (e.g. JELLO_PARTS=contact).
# --whole: one run of every case and solver (longer than 8 minutes on an H200: the 1M-tet
# box's CPU rows and subspace precompute). --quick: the CI case.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=parts
case "${1:-}" in
  --quick) mode=quick; shift ;;
  --whole) mode=whole; shift ;;
esac
out=${1:-$PWD/out}
export JELLO_MESH_DIR=${JELLO_MESH_DIR:-$here/meshes}
export JELLO_SCENE_DIR=${JELLO_SCENE_DIR:-$here/scenes}
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
mkdir -p "$out"
case $mode in
  quick) exec "$here/gpu_bench" --quick --out "$out" ;;
  whole) exec "$here/gpu_bench" --out "$out" ;;
esac
scale=${JELLO_PART_SCALE:-1}
log=$out/log.txt
: > "$log"
all=jgs2,vbd,qn,dot,lbfgs-h,admm,newton
# name, seconds, cases, solvers, backends
parts=(
  "a114_jgs2_vbd 120 armadillo_114k jgs2,vbd device,cpu"
  "contact 120"
  "box1m_vbd 60 box_1m vbd device"
  "a114_rest 90 armadillo_114k qn,dot,lbfgs-h,admm,newton device,cpu"
  "small 80 box,armadillo_18k $all device,cpu"
)
for p in "${parts[@]}"; do
  read -r name secs cases solvers backends <<<"$p"
  # JELLO_PARTS (a comma list of part names) runs only those.
  [[ -n "${JELLO_PARTS:-}" && ",$JELLO_PARTS," != *",$name,"* ]] && continue
  limit=$(awk -v s="$secs" -v k="$scale" 'BEGIN { printf "%d", s * k }')
  if [ "$name" = contact ]; then
    half=$((limit / 2))
    echo "=== contact: stack 18k (newton cpu, jgs2/vbd device), limit ${half} s ($(date -u +%T))" | tee -a "$log"
    JELLO_BENCH_OUT=$out/contact JELLO_BENCH_IPC_CELLS=10 JELLO_BENCH_IPC_CARDS= JELLO_BENCH_STEPS=2 \
      JELLO_BENCH_IPC_SOLVERS=newton:cpu,jgs2:device,vbd:device JELLO_BENCH_BUDGET_S=$((half / 4)) \
      timeout -k 5 "$half" "$here/ipc_solvers" >>"$log" 2>&1
    rc=$?
    echo "=== contact: house of cards x8 (jgs2 device from the start), limit ${half} s ($(date -u +%T))" | tee -a "$log"
    JELLO_BENCH_OUT=$out/contact_cards JELLO_BENCH_IPC_CELLS= JELLO_BENCH_IPC_CARDS=8 \
      JELLO_BENCH_IPC_WARMUP=0 JELLO_BENCH_STEPS=4 JELLO_BENCH_IPC_SOLVERS=jgs2:device \
      JELLO_BENCH_BUDGET_S=$((half / 2)) timeout -k 5 "$half" "$here/ipc_solvers" >>"$log" 2>&1
    rc2=$?
    [ $rc -eq 0 ] && rc=$rc2
  else
    echo "=== $name: $cases / $solvers / $backends, limit ${limit} s ($(date -u +%T))" | tee -a "$log"
    JELLO_BENCH_CASES=$cases JELLO_BENCH_SOLVERS=$solvers JELLO_BENCH_BACKENDS=$backends \
      timeout -k 5 "$limit" "$here/gpu_bench" --out "$out/$name" >>"$log" 2>&1
    rc=$?
  fi
  lines=row; [ "$name" = contact ] && lines=step
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && echo "=== $name: stopped at its limit; what it finished is in the '$lines:' lines of $log" | tee -a "$log"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && echo "=== $name: exit status $rc" | tee -a "$log"
done
cat "$out"/*/gpu-bench.md "$out"/contact*/ipc_solvers.md > "$out/gpu-bench.md" 2>/dev/null
echo "tables: $out/gpu-bench.md; log: $log"
