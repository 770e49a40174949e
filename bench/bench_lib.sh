# Sourced by the bench scripts: the figures of one `flexsn-run --bench`
# output (CUDA), passed as the argument.
# percent of copy bandwidth, e.g. 89
bench_pct() { sed -n 's/.*kernel median .*, \([0-9]*\)% of copy.*/\1/p' <<<"$1"; }
# kernel median in ms, e.g. 0.0822
bench_ms() { sed -n 's/.*kernel median \([0-9.]*\) ms.*/\1/p' <<<"$1"; }
# the entry the launch took, e.g. lif_inference_scalar
bench_entry() { sed -n 's/^bench: entry \([^ ]*\).*/\1/p' <<<"$1"; }
