#!/usr/bin/env bash
# Builds the store request-parser fuzz target with clang's libFuzzer and
# AddressSanitizer/UBSan, and fuzzes it for a bounded time from a seed corpus
# of real PyTorch client requests. Fails on any crash, leak or sanitizer report.
set -euo pipefail
SECONDS_TO_RUN="${FUZZ_SECONDS:-20}"
CXX="$(command -v clang++-14 || command -v clang++ || true)"
if [ -z "$CXX" ]; then
  echo "clang++ is missing: scripts/setup.sh installs clang and libclang-rt-14-dev" >&2
  exit 1
fi
work="${TEST_TMPDIR:-$(mktemp -d)}"
"$CXX" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. \
  tests/store/fuzz/wire_protocol_fuzz.cc store/wire_protocol.cc store/key_value_table.cc store/store.cc \
  -lfmt -o "$work/wire_protocol_fuzz"
corpus="$work/corpus"
mkdir -p "$corpus"
seed() { printf "$2" > "$corpus/$1"; }
# The modern handshake, SET, ADD, CHECK and MULTI_SET as torch 2.6 sends them; torch 1.13's ADD and WAIT.
seed handshake '\x00\xce\xf7\x85\x3c\x0d\xc9\x49\x00\x00'
seed set '\x00\xce\xf7\x85\x3c\x01\x03\x00\x00\x00\x00\x00\x00\x00/k1\x02\x00\x00\x00\x00\x00\x00\x00v1'
seed add '\x00\xce\xf7\x85\x3c\x04\x04\x00\x00\x00\x00\x00\x00\x00/cnt\xfe\xff\xff\xff\xff\xff\xff\xff'
seed check '\x00\xce\xf7\x85\x3c\x05\x02\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00/k1\x01\x00\x00\x00\x00\x00\x00\x00k'
seed mset '\x00\xce\xf7\x85\x3c\x0b\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00/a\x01\x00\x00\x00\x00\x00\x00\x001'
seed legacy_add '\x03\x02\x00\x00\x00\x00\x00\x00\x00/n\x03\x00\x00\x00\x00\x00\x00\x00'
seed legacy_wait '\x05\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00/w'
"$work/wire_protocol_fuzz" -max_total_time="$SECONDS_TO_RUN" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$corpus" 2>&1 | tail -n 25
echo "fuzzing finished without a finding"
