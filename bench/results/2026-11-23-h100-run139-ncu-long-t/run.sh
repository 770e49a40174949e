#!/usr/bin/env bash
# run 139: ncu on the long-T small-NCL kernels with the L2 prefetch on (default):
# what bounds lif's backward at T=1024 NCL=16K (f32 72%, bf16 34% of copy)?
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/a; xz -dc .gpu/flexsn-run.xz > /tmp/a/flexsn-run; chmod +x /tmp/a/flexsn-run
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --metrics smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio"
one() { # name variant dtype T NCL [extra]
  timeout 100 $NCU --clock-control none $S -k regex:${7:-lif_} --launch-count 1 \
    /tmp/a/flexsn-run examples/lif.mlir --backend=cuda --variant=$2 --dtype=$3 --T=$4 --ncl=$5 ${6:-} > $OUT/ncu-$1.txt 2>&1
  echo "== $1"; grep -E "lif_.*\(|Duration|Stall Short|Stall Long|Stall Wait|Stall MIO|Stall Math|Stall LG|Stall Barrier|Stall Not|DRAM Throughput|Achieved Occupancy|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued|Registers Per|smsp__average_warps" $OUT/ncu-$1.txt | head -40
}
one lif-bwd-bf16-T1024 backward bf16 1024 16384 "" backward
one lif-bwd-f32-T1024 backward f32 1024 16384 "" backward
one lif-bwd-bf16-T1024-l2off backward bf16 1024 16384 --l2-prefetch=0 backward
one lif-fwd-bf16-T1024-l2off forward bf16 1024 16384 --l2-prefetch=0
