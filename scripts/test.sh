#!/usr/bin/env bash
# Sets up, builds, and runs every test (lit regression suite).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
ninja -C "$BUILD_DIR" check-flexsn
