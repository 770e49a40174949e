#!/usr/bin/env bash
# run 141: B = 0d501b6 (bounded reciprocal) against C = B + refill before
# the step + invariant (ld.global.nc) reads; A = d3f35e6 against C for the
# backward; ncu of lif f32 backward at T=1024 NCL=16K for B and C
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/a /tmp/b /tmp/c
xz -dc .gpu/flexsn-run-old.xz > /tmp/a/flexsn-run; xz -dc .gpu/flexsn-run.xz > /tmp/b/flexsn-run; xz -dc .gpu/flexsn-run-c.xz > /tmp/c/flexsn-run; chmod +x /tmp/?/flexsn-run
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
{
echo "== lif, B | C"
CORES=lif VARIANTS="backward inference" SHAPES="4_4194304 32_262144 256_65536 1024_16384" timeout 150 bench/ab_kernels.sh /tmp/b/flexsn-run /tmp/c/flexsn-run
echo "== lif backward, A | C"
CORES=lif VARIANTS="backward" SHAPES="4_4194305 32_262144 256_65536 1024_16384" timeout 100 bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/c/flexsn-run
echo "== traced tutorial, B | C"
IR_A=.gpu/tutorial_traced.mlir IR_B=.gpu/tutorial_traced.mlir CORES=tutorial_traced VARIANTS="forward backward" SHAPES="32_262144 256_65536 1024_16384" timeout 120 bench/ab_kernels.sh /tmp/b/flexsn-run /tmp/c/flexsn-run
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__inst_executed.sum,gpu__time_duration.sum,smsp__average_warp_latency_per_inst_issued.ratio
for v in b c; do
  for dt in f32 bf16; do
    echo "== ncu $v $dt"
    timeout 60 $NCU --clock-control none --metrics $M -k regex:backward --launch-count 1 \
      /tmp/$v/flexsn-run examples/lif.mlir --backend=cuda --variant=backward --dtype=$dt --T=1024 --ncl=16384 2>&1 | grep -E "lif_|smsp__|gpu__" | head -14
  done
done
} 2>&1 | tee $OUT/run141.txt
