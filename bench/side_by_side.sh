#!/usr/bin/env bash
# Prefill and decode speed of keel beside llama.cpp on the same weights, the same thread count,
# runs interleaved (keel, llama.cpp, keel, llama.cpp, ...) so that load from anything else on the
# machine falls on both alike. Prints one table: median tokens/s of each and the keel/llama.cpp ratio.
#
# The model files (see docs/performance.md, "Beside llama.cpp", for the commands that make them):
#   $MODELS/keel-bf16/           keel synth of Qwen2.5-0.5B-Instruct, bf16 (with its tokenizer)
#   $MODELS/keel-mlx8/ keel-mlx4/  keel synth --dtype mlx8 / mlx4 (group 64)
#   $MODELS/q05-bf16.gguf        keel synth --out q05-bf16.gguf: keel-bf16's weights as GGUF (BF16 matrices)
#   $MODELS/q05-q8_0-pure.gguf   llama-quantize --pure ... Q8_0
#   $MODELS/q05-q4_0-pure.gguf   llama-quantize --pure ... Q4_0
#   $MODELS/q05-q4_k_m.gguf      llama-quantize ... Q4_K_M (only for the q4km pair)
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/side_by_side.sh [-t THREADS] [-p LENGTHS] [-n GEN] [-r RUNS] [-w PAIRS]

  -t THREADS  threads for both (default 2)
  -p LENGTHS  prefill lengths, comma-separated (default 512,4096,16384; empty: no prefill)
  -n GEN      decode tokens from an empty context (default 64; 0: no decode)
  -r RUNS     interleaved runs of each, the median is reported (default 3)
  -w PAIRS    weight pairs, comma-separated, from:
                bf16  keel bf16       vs llama.cpp BF16
                q8    keel MLX 8-bit  vs llama.cpp Q8_0 (--pure)
                q4    keel MLX 4-bit  vs llama.cpp Q4_0 (--pure)
                q4km  keel MLX 4-bit  vs llama.cpp Q4_K_M
                gbf16, gq8, gq4, gq4km: both read the same GGUF file (BF16, Q8_0, Q4_0,
                      Q4_K_M)
              (default bf16,q8,q4)

environment:
  KEEL           keel binary (default: build/keel beside this script's repo)
  LLAMA_CPP      folder with llama-bench (default /work/llama.cpp/b/bin)
  MODELS         folder with the model files (default /tmp/sbs)
  KEEL_REPEATS   keel bench --repeats per run (default 2: keel's first repeat also pays the page
                 faults on its mapped weights, llama-bench warms up by itself; the best is kept)
  LLAMA_REPEATS  llama-bench -r per run (default 1; the best sample is kept)
  KEEL_ARGS      extra flags for keel bench (e.g. "--kv-policy int8")
  LLAMA_ARGS     extra flags for llama-bench (e.g. "-fa 1 -ub 2048")
  LLAMA_OMP_WAIT_POLICY  OMP_WAIT_POLICY for llama-bench (default passive; "default" leaves it
                 unset). llama.cpp is built with OpenMP, whose threads spin at the barrier after
                 every graph node; when other work shares the cores a descheduled thread stalls
                 the rest, and decode fell from ~30 to 2-13 tok/s on the loaded 2-core machine.
                 Passive threads sleep there instead; on a quiet machine try both.
  LOG            where each run's output goes (default: a temporary file, named at the end)

Prefill of 16384 tokens takes minutes per run: use -p 512,4096 for a quick look.
EOF
}

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KEEL="${KEEL:-$repo/build/keel}"
LLAMA_CPP="${LLAMA_CPP:-/work/llama.cpp/b/bin}"
MODELS="${MODELS:-/tmp/sbs}"
KEEL_REPEATS="${KEEL_REPEATS:-2}"
LLAMA_REPEATS="${LLAMA_REPEATS:-1}"
KEEL_ARGS="${KEEL_ARGS:-}"
LLAMA_ARGS="${LLAMA_ARGS:-}"
LLAMA_OMP_WAIT_POLICY="${LLAMA_OMP_WAIT_POLICY:-passive}"

threads=2
lengths="512,4096,16384"
gen=64
runs=3
pairs="bf16,q8,q4"
while getopts ":t:p:n:r:w:h" opt; do
  case "$opt" in
    t) threads="$OPTARG" ;;
    p) lengths="$OPTARG" ;;
    n) gen="$OPTARG" ;;
    r) runs="$OPTARG" ;;
    w) pairs="$OPTARG" ;;
    h) usage; exit 0 ;;
    :) echo "side_by_side: error: -$OPTARG needs a value" >&2; usage >&2; exit 2 ;;
    *) echo "side_by_side: error: unknown flag -$OPTARG" >&2; usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -gt 0 ]; then
  echo "side_by_side: error: unexpected argument '$1'" >&2; usage >&2; exit 2
fi

fail() { echo "side_by_side: error: $*" >&2; exit 1; }
is_count() { [[ "$1" =~ ^[0-9]+$ ]]; }

# need_count VALUE MIN WHAT: VALUE is a whole number of at least MIN, or the run stops here.
need_count() {
  if ! is_count "$1" || [ "$1" -lt "$2" ]; then fail "$3: '$1' is not a whole number of $2 or more"; fi
}
need_count "$threads" 1 "-t"
need_count "$gen" 0 "-n"
need_count "$runs" 1 "-r"
need_count "$KEEL_REPEATS" 1 "KEEL_REPEATS"
need_count "$LLAMA_REPEATS" 1 "LLAMA_REPEATS"
IFS=',' read -r -a prefill_lengths <<< "$lengths"
for n in "${prefill_lengths[@]}"; do need_count "$n" 1 "-p"; done
IFS=',' read -r -a pair_names <<< "$pairs"
[ "${#pair_names[@]}" -gt 0 ] || fail "-w: no weight pairs"
[ "${#prefill_lengths[@]}" -gt 0 ] || [ "$gen" -gt 0 ] || fail "nothing to measure (-p empty and -n 0)"

# pair name -> keel folder, GGUF file, table label
pair_keel() {
  case "$1" in
    bf16) echo "$MODELS/keel-bf16" ;; q8) echo "$MODELS/keel-mlx8" ;; q4|q4km) echo "$MODELS/keel-mlx4" ;;
    g*) pair_gguf "$1" ;;  # keel reads the very file llama.cpp does
    *) fail "-w: unknown pair '$1' (expected bf16, q8, q4, q4km, gbf16, gq8, gq4 or gq4km)" ;;
  esac
}
pair_gguf() {
  case "$1" in
    bf16|gbf16) echo "$MODELS/q05-bf16.gguf" ;; q8|gq8) echo "$MODELS/q05-q8_0-pure.gguf" ;;
    q4|gq4) echo "$MODELS/q05-q4_0-pure.gguf" ;; q4km|gq4km) echo "$MODELS/q05-q4_k_m.gguf" ;;
  esac
}
pair_label() {
  case "$1" in
    bf16) echo "bf16 / BF16" ;; q8) echo "mlx8 / Q8_0" ;; q4) echo "mlx4 / Q4_0" ;; q4km) echo "mlx4 / Q4_K_M" ;;
    gbf16) echo "BF16 gguf" ;; gq8) echo "Q8_0 gguf" ;; gq4) echo "Q4_0 gguf" ;; gq4km) echo "Q4_K_M gguf" ;;
  esac
}

[ -x "$KEEL" ] || fail "no keel binary at $KEEL (build it, or set KEEL)"
[ -x "$LLAMA_CPP/llama-bench" ] || fail "no llama-bench in $LLAMA_CPP (set LLAMA_CPP)"
for p in "${pair_names[@]}"; do
  k="$(pair_keel "$p")"; g="$(pair_gguf "$p")"
  [ -f "$k/config.json" ] || [ -f "$k" ] || fail "pair $p: no keel model at $k (set MODELS, or make it: docs/performance.md)"
  [ -f "$g" ] || fail "pair $p: no GGUF at $g (set MODELS, or make it: docs/performance.md)"
done

LOG="${LOG:-$(mktemp /tmp/side_by_side.XXXXXX.log)}"
: > "$LOG"

# One keel bench run; prints tokens/s of the prefill (mode pp) or the decode (mode tg).
# keel bench always runs both: the other one is kept minimal (1 prompt token, or 1 generated token).
keel_run() {
  local model="$1" mode="$2" n="$3" out
  local -a flags=(--model "$model" --threads "$threads" --repeats "$KEEL_REPEATS" --no-limits)
  if [ "$mode" = pp ]; then flags+=(--prompt-tokens "$n" --gen-tokens 1); else flags+=(--prompt-tokens 1 --gen-tokens "$n"); fi
  # shellcheck disable=SC2086 # KEEL_ARGS is a list of flags
  out="$("$KEEL" bench "${flags[@]}" $KEEL_ARGS 2>&1)" || { echo "$out" >> "$LOG"; fail "keel bench failed (see $LOG)"; }
  echo "$out" >> "$LOG"
  local key; [ "$mode" = pp ] && key=prefill || key=decode
  awk -v key="$key" '$1 == key { for (i = 1; i <= NF; ++i) if ($i == "tok/s") { print $(i - 1); exit } }' <<< "$out"
}

# One llama-bench run; prints the best of its -r samples (as keel bench keeps its best repeat).
llama_run() {
  local model="$1" mode="$2" n="$3" out
  local -a flags=(-m "$model" -t "$threads" -r "$LLAMA_REPEATS" -o json)
  if [ "$mode" = pp ]; then flags+=(-p "$n" -n 0); else flags+=(-p 0 -n "$n"); fi
  local -a omp=(env OMP_WAIT_POLICY="$LLAMA_OMP_WAIT_POLICY")
  if [ "$LLAMA_OMP_WAIT_POLICY" = default ]; then omp=(env -u OMP_WAIT_POLICY); fi
  # shellcheck disable=SC2086 # LLAMA_ARGS is a list of flags
  out="$("${omp[@]}" "$LLAMA_CPP/llama-bench" "${flags[@]}" $LLAMA_ARGS 2>>"$LOG")" || { echo "$out" >> "$LOG"; fail "llama-bench failed (see $LOG)"; }
  echo "$out" >> "$LOG"
  awk '/"samples_ts"/ { gsub(/.*\[|\].*/, ""); n = split($0, v, ","); best = v[1]
                          for (i = 2; i <= n; ++i) if (v[i] + 0 > best + 0) best = v[i]
                          printf "%.2f\n", best; exit }' <<< "$out"
}

median() { tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

tests=()
for n in "${prefill_lengths[@]}"; do tests+=("pp:$n"); done
if [ "$gen" -gt 0 ]; then tests+=("tg:$gen"); fi

load_before="$(uptime)"
rows=()
for p in "${pair_names[@]}"; do
  k="$(pair_keel "$p")"; g="$(pair_gguf "$p")"
  for t in "${tests[@]}"; do
    mode="${t%%:*}"; n="${t#*:}"
    keel_tps=(); llama_tps=()
    for ((i = 1; i <= runs; ++i)); do
      kt="$(keel_run "$k" "$mode" "$n")"; [ -n "$kt" ] || fail "no tok/s in keel bench's output (see $LOG)"
      lt="$(llama_run "$g" "$mode" "$n")"; [ -n "$lt" ] || fail "no samples_ts in llama-bench's output (see $LOG)"
      keel_tps+=("$kt"); llama_tps+=("$lt")
      echo "side_by_side: $(pair_label "$p") $mode$n run $i/$runs: keel $kt, llama.cpp $lt tok/s" >&2
    done
    km="$(echo "${keel_tps[*]}" | median)"; lm="$(echo "${llama_tps[*]}" | median)"
    rows+=("$(pair_label "$p");$mode$n;$km;$lm;${keel_tps[*]};${llama_tps[*]}")
  done
done
load_after="$(uptime)"

llama_build="$(awk -F'"' '/"build_commit"/ { print $4; exit }' "$LOG")"
echo "keel vs llama.cpp (build ${llama_build:-?}), $threads threads, median of $runs interleaved runs (keel --repeats $KEEL_REPEATS, llama-bench -r $LLAMA_REPEATS, OMP_WAIT_POLICY $LLAMA_OMP_WAIT_POLICY)"
echo "load before: ${load_before#*load average: }   after: ${load_after#*load average: }"
printf '| %-13s | %-7s | %11s | %11s | %10s | %-24s | %-24s |\n' "weights" "test" "keel tok/s" "llama tok/s" "keel/llama" "keel runs" "llama.cpp runs"
printf '|%s|%s|%s|%s|%s|%s|%s|\n' "---------------" "---------" "-------------" "-------------" "------------" "--------------------------" "--------------------------"
for r in "${rows[@]}"; do
  IFS=';' read -r label test km lm kr lr <<< "$r"
  ratio="$(awk -v a="$km" -v b="$lm" 'BEGIN { printf "%.2f", a / b }')"
  printf '| %-13s | %-7s | %11.1f | %11.1f | %10s | %-24s | %-24s |\n' "$label" "$test" "$km" "$lm" "$ratio" "$kr" "$lr"
done
echo "each run's output: $LOG" >&2
