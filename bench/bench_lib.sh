# Sourced by the bench scripts: one kernel-only timing, and the figures of
# its `flexsn-run --bench` output (CUDA), passed as the argument.
# bench_run FLEXSN-RUN INPUT.mlir VARIANT T NCL DTYPE [flags...]: the output
# (stdout and stderr) of one timing, median of 30 runs
bench_run() {
  "$1" "$2" --backend=cuda --variant="$3" --T="$4" --ncl="$5" --dtype="$6" \
    --bench --reps=30 "${@:7}" 2>&1
}
# percent of copy bandwidth, e.g. 89
bench_pct() { sed -n 's/.*kernel median .*, \([0-9]*\)% of copy.*/\1/p' <<<"$1"; }
# percent of a copy of the same bytes (its time over the kernel's), e.g. 91
bench_same() { sed -n 's/.*kernel at \([0-9]*\)% of a same-size copy.*/\1/p' <<<"$1"; }
# kernel median in ms, e.g. 0.0822
bench_ms() { sed -n 's/.*kernel median \([0-9.]*\) ms.*/\1/p' <<<"$1"; }
# the entry the launch took, e.g. lif_inference_scalar
bench_entry() { sed -n 's/^bench: entry \([^ ]*\).*/\1/p' <<<"$1"; }
