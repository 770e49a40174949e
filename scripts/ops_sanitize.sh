#!/usr/bin/env bash
# The package's PyTorch operators (libFlexSNTorch.so) under AddressSanitizer
# and UndefinedBehaviorSanitizer: the operators built with
# -fsanitize=address,undefined (a build key of their own, in a cache of its
# own), the sanitizer runtime preloaded into Python, then the operator
# fuzzer (FLEXSN_FUZZ_ITERATIONS calls, 3000 by default) and the operator,
# fast-path and training-node tests. Any report fails the run.
#   scripts/ops_sanitize.sh            the CPU backend (and CUDA where present)
set -euo pipefail
cd "$(dirname "$0")/.."
export FLEXSN_LIBRARY=${FLEXSN_LIBRARY:-$PWD/${FLEXSN_BUILD_DIR:-build}/lib/libFlexSN.so}
export FLEXSN_OPS_CXXFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
export FLEXSN_CACHE_DIR=${FLEXSN_CACHE_DIR:-$(mktemp -d)}
export FLEXSN_FUZZ_ITERATIONS=${FLEXSN_FUZZ_ITERATIONS:-3000}
CXX_DRIVER=${CXX:-g++}
# The C++ runtime is preloaded too: ASan's interceptor of __cxa_throw needs
# it present when ASan starts (PyTorch's errors are C++ exceptions).
export LD_PRELOAD="$($CXX_DRIVER -print-file-name=libasan.so) $(realpath "$($CXX_DRIVER -print-file-name=libstdc++.so)")"
# Python and PyTorch are not instrumented: their allocations are not leaks
# of ours.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd python-bindings
${PYTHON:-python3} -m pytest -q -p no:cacheprovider tests/test_operator_fuzz.py \
  tests/test_operators.py tests/test_fast_path.py tests/test_backward_modes.py "$@"
echo "ops-sanitize: no AddressSanitizer or UndefinedBehaviorSanitizer report"
