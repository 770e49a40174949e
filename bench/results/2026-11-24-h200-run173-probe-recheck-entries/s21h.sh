#!/usr/bin/env bash
# Run 173: (1) the staging probe after its refactor (consumeRing), trivial
# step, T=256 NCL=64K: the same figures as run 169? (2) at mid NCL, the
# vector entry of a kernel reading many sequences (depth 1 at 4 lanes)
# against the scalar entry alone (--neurons-per-thread=1): which is faster?
set -uo pipefail
mkdir -p /tmp/b; xz -dc .gpu/flexsn-run.xz > /tmp/b/flexsn-run; chmod +x /tmp/b/flexsn-run
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/device.txt
.gpu/staging_probe_trivial 256 65536 2>&1 | tee $OUT/probe.txt
R=/tmp/b/flexsn-run
{ for core in two_in_two_state lif; do for dt in bf16 f32; do for v in backward inference; do
  for s in 32_262144 8_1048576 4_4194304; do read -r T N <<<"${s/_/ }"
    a=$($R examples/$core.mlir --backend=cuda --variant=$v --T=$T --ncl=$N --dtype=$dt --bench --reps=30 2>&1)
    b=$($R examples/$core.mlir --backend=cuda --variant=$v --T=$T --ncl=$N --dtype=$dt --bench --reps=30 --neurons-per-thread=1 2>&1)
    pa=$(sed -n 's/.*kernel at \([0-9]*\)% of a same-size copy.*/\1/p' <<<"$a"); ma=$(sed -n 's/.*kernel median \([0-9.]*\) ms.*/\1/p' <<<"$a"); ea=$(sed -n 's/^bench: entry \([^ ]*\).*/\1/p' <<<"$a")
    pb=$(sed -n 's/.*kernel at \([0-9]*\)% of a same-size copy.*/\1/p' <<<"$b"); mb=$(sed -n 's/.*kernel median \([0-9.]*\) ms.*/\1/p' <<<"$b"); eb=$(sed -n 's/^bench: entry \([^ ]*\).*/\1/p' <<<"$b")
    printf "%-17s %-4s %-9s T=%-3s NCL=%-8s | %-34s %4s%% %7s | %-30s %4s%% %7s\n" $core $dt $v $T $N "$ea" "$pa" "$ma" "$eb" "$pb" "$mb"
  done; done; done; done; } 2>&1 | tee $OUT/entries.txt
