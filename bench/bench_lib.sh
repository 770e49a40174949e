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
# each_case ROW-FUNCTION: calls ROW-FUNCTION CORE DTYPE VARIANT T NCL for
# every case of $CORES x $DTYPES x $VARIANTS x $SHAPES (T_NCL words), with
# the defaults below or the caller's DEFAULT_SHAPES; two_in_two_state in
# f32 only when SKIP_2IN2ST_F32 is empty.
each_case() {
  local core dt v s T N
  for core in ${CORES:-lif two_in_two_state}; do
    for dt in ${DTYPES:-bf16 f32}; do
      [ -n "${SKIP_2IN2ST_F32:-}" ] && [ "$core" = two_in_two_state ] &&
        [ "$dt" = f32 ] && continue
      for v in ${VARIANTS:-inference final_state backward}; do
        for s in ${SHAPES:-$DEFAULT_SHAPES}; do
          read -r T N <<<"${s/_/ }"
          "$1" "$core" "$dt" "$v" "$T" "$N"
        done
      done
    done
  done
}
