#!/usr/bin/env bash
# Short fuzzing smoke for CI: builds every cargo-fuzz target, then runs each for
# FUZZ_SECONDS (default 20) from its committed corpus, one at a time. Fails on the first
# crash, hang (a target panics after 5 s without progress) or timeout; the reproducer is left
# in fuzz/artifacts/<target>/ and the command to replay it is printed.
#
# Built without a sanitizer (FUZZ_SANITIZER=none, the default here): an ASan build of all
# targets takes about twice as long on 2 cores, and safe Rust gains little from ASan in 20 s.
# Long campaigns keep ASan (see README.md). New inputs go to a scratch directory, so the
# committed corpus is read, never written.
#
# The seed is fixed (FUZZ_SEED, default 1), so a CI failure replays on any machine with the
# same seed, and a clean run here for longer than CI's 20 s covers what CI will try. The
# smoke guards against regressions; finding new bugs is the long campaigns' job (README.md),
# which use random seeds.
#
# Needs the nightly toolchain and cargo-fuzz (`.ci/run` installs both).
set -euo pipefail
cd "$(dirname "$0")"

seconds="${FUZZ_SECONDS:-20}"
sanitizer="${FUZZ_SANITIZER:-none}"
seed="${FUZZ_SEED:-1}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"

targets=$(cargo +nightly fuzz list)
echo "fuzz targets: $(echo "$targets" | tr '\n' ' ')"

echo "building (sanitizer: $sanitizer)"
cargo +nightly fuzz build --sanitizer "$sanitizer"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

for target in $targets; do
  echo
  echo "--> $target for ${seconds}s"
  mkdir -p "$scratch/$target" "corpus/$target"
  # -timeout: one input running 25 s is a hang even if the target's own 5 s checks missed it.
  # -rss_limit_mb: the default 2 GB, stated. -print_final_stats: execs/s and coverage in the log.
  if ! cargo +nightly fuzz run --sanitizer "$sanitizer" "$target" "$scratch/$target" "corpus/$target" -- \
      -seed="$seed" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
      > "$scratch/$target.log" 2>&1; then
    tail -n 60 "$scratch/$target.log"
    echo
    echo "FAILED: $target (reproducer under fuzz/artifacts/$target/)"
    exit 1
  fi
  grep -E '^#[0-9]+ +DONE|^stat::number_of_executed_units|^stat::average_exec_per_sec|^stat::peak_rss_mb' \
    "$scratch/$target.log" || true
done

echo
echo "fuzz smoke passed: $(echo "$targets" | wc -l) targets, ${seconds}s each"
