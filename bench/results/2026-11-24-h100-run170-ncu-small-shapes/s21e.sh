#!/usr/bin/env bash
# Run 170: ncu on the bf16 and f32 backwards at the issue's small shapes:
# what bounds two_in_two_state's bf16 backward (70-72% of a same-size copy
# against f32's 98-101%)?
set -uo pipefail
mkdir -p /tmp/a; xz -dc .gpu/flexsn-run.xz > /tmp/a/flexsn-run; chmod +x /tmp/a/flexsn-run
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"; nvidia-smi --query-gpu=name --format=csv,noheader
M=smsp__inst_executed.sum,smsp__cycles_active.avg,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --metrics $M"
one() { # name core variant dtype T NCL
  timeout 120 $NCU --clock-control none $S -k regex:${2}_backward --launch-count 1 \
    /tmp/a/flexsn-run examples/$2.mlir --backend=cuda --variant=backward --dtype=$3 --T=$4 --ncl=$5 > /tmp/ncu-$1.txt 2>&1
  echo "== $1"; grep -E "_backward.*\(|Duration|DRAM Throughput|Achieved Occupancy|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued|Registers Per|Block Size|Grid Size|smsp__|sm__warps|dram__bytes" /tmp/ncu-$1.txt | head -40
}
{
one 2in2st-bf16-T256 two_in_two_state bf16 256 65536
one 2in2st-f32-T256 two_in_two_state f32 256 65536
one 2in2st-bf16-T32 two_in_two_state bf16 32 262144
one 2in2st-f32-T32 two_in_two_state f32 32 262144
one lif-bf16-T256 lif bf16 256 65536
one lif-f32-T256 lif f32 256 65536
} 2>&1 | tee $OUT/ncu-summary.txt
tar cJf $OUT/ncu-full.tar.xz -C /tmp $(cd /tmp && ls ncu-*.txt)
for c in "two_in_two_state bf16 256 65536" "two_in_two_state f32 256 65536" "two_in_two_state bf16 32 262144" "two_in_two_state f32 32 262144"; do
  set -- $c; echo "== $1 $2 T=$3 NCL=$4"
  /tmp/a/flexsn-run examples/$1.mlir --backend=cuda --variant=backward --dtype=$2 --T=$3 --ncl=$4 --bench --reps=30 2>&1 | grep -E "entry|median|same-size"
done 2>&1 | tee $OUT/bench.txt
