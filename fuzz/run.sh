#!/usr/bin/env bash
# Runs each libFuzzer harness for SECONDS (default 60) on its seed corpus (examples/ and specs/),
# stopping at the first crash, leak, sanitizer report or time-out of one input (10 s).
#   fuzz/run.sh BUILD_DIR [SECONDS] [NAME...]      NAME: csv pipeline_yaml fsdp_yaml router_yaml torchtitan megatron deepspeed shell_args output_paths diff_git
#                                                    plan_share megatron_layout phases
# BUILD_DIR is a tree configured with -DSCHEDCHECK_FUZZ=ON and clang (README.md, "Fuzzing and
# sanitizers"). New inputs collect in BUILD_DIR/fuzz-corpus/NAME; a failing input is written to
# BUILD_DIR/fuzz-artifacts/ and the script exits non-zero.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS] [NAME...]}"
build="$(cd "$build" && pwd)"  # absolute: a harness may change its working folder while it runs
seconds="${2:-60}"
shift $(( $# >= 2 ? 2 : 1 ))
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(csv pipeline_yaml fsdp_yaml router_yaml torchtitan megatron deepspeed shell_args output_paths diff_git
                                plan_share megatron_layout phases)

seeds="$build/fuzz-seeds"
rm -rf "$seeds"
mkdir -p "$seeds/csv" "$seeds/yaml" "$seeds/toml" "$seeds/sh" "$seeds/json" "$seeds/args" "$seeds/share" "$seeds/layout" \
  "$build/fuzz-artifacts"
i=0
while IFS= read -r -d '' f; do
  i=$((i + 1))
  case "$f" in
    *.csv) cp "$f" "$seeds/csv/$i.csv" ;;
    *.toml) cp "$f" "$seeds/toml/$i.toml" ;;
    *.sh) cp "$f" "$seeds/sh/$i.sh" ;;
    *.json) cp "$f" "$seeds/json/$i.json" ;;
    *.args) cp "$f" "$seeds/args/$i.args" ;;
    *.share) cp "$f" "$seeds/share/$i.share" ;;
    *.layout) cp "$f" "$seeds/layout/$i.layout" ;;
    *) cp "$f" "$seeds/yaml/$i.yaml" ;;
  esac
done < <(find "$root/examples" "$root/specs" "$root/fuzz/seeds" -type f \( -name '*.csv' -o -name '*.yaml' -o -name '*.yml' \
           -o -name '*.toml' -o -name '*.sh' -o -name '*.json' -o -name '*.args' -o -name '*.share' -o -name '*.layout' \) -size -64k -print0)

status=0
for name in "${names[@]}"; do
  bin="$build/fuzz/fuzz_$name"
  [ -x "$bin" ] || { echo "fuzz/run.sh: $bin not built (configure with -DSCHEDCHECK_FUZZ=ON)" >&2; exit 2; }
  case "$name" in
    csv) kind=csv ;;
    torchtitan) kind=toml ;;
    megatron | shell_args) kind=sh ;;
    deepspeed) kind=json ;;
    diff_git) kind=args ;;
    plan_share) kind=share ;;
    megatron_layout) kind=layout ;;
    *) kind=yaml ;;
  esac
  corpus="$build/fuzz-corpus/$name"
  mkdir -p "$corpus"
  echo "== fuzz_$name: ${seconds} s, seeds $(ls "$seeds/$kind" | wc -l), corpus $(ls "$corpus" | wc -l)"
  # The readers' nesting and expansion limits sit at tens of thousands of characters: long
  # inputs must reach them (the seeds hold the 40,743-sign and 30,927-part reproductions).
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-artifacts/$name-" "$corpus" "$seeds/$kind" 2>"$build/fuzz-$name.log"; then
    echo "fuzz_$name FAILED; the last lines of $build/fuzz-$name.log:" >&2
    tail -40 "$build/fuzz-$name.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/fuzz-$name.log" | tr '\n' ' '
    echo
  fi
done
exit $status
