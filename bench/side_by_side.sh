#!/usr/bin/env bash
# Prefill and decode speed of keel beside llama.cpp, on the same files where both read GGUF, with
# the same thread count, runs interleaved (keel, llama.cpp, keel, ...) so that load from anything
# else falls on both alike. Both sides get the same treatment:
#   - one untimed run of each before a pair's timed runs (the page cache holds the file for both);
#   - in each timed run, the best of 2 samples in one process (keel bench --repeats 2; llama-bench
#     -r 2 --no-warmup): the first sample pays the page faults of the mapped weights on both sides;
#   - the median of at least 3 interleaved runs, with the range.
# llama.cpp runs at its own defaults otherwise (OpenMP threads spinning, its default batch sizes),
# with flash attention off and on (-fa 0,1), the faster kept for each run.
#
# Every run's raw output, the commands, the keel commit, the llama.cpp build and the machine go into
# OUT (bench/results/<date>-<machine>/ by default): run.txt, summary.md and one file per run.
#
# The model files (docs/performance.md, "How these numbers are made", has the commands):
#   $MODELS/q05-bf16.gguf     keel synth of Qwen2.5-0.5B-Instruct's shape as GGUF (BF16 matrices)
#   $MODELS/q05-q8_0.gguf     llama-quantize q05-bf16.gguf ... Q8_0
#   $MODELS/q05-q4_k_m.gguf   llama-quantize q05-bf16.gguf ... Q4_K_M
#   $MODELS/q05-q4_0.gguf     llama-quantize --pure q05-bf16.gguf ... Q4_0
#   $MODELS/keel-mlx8/, keel-mlx4/  keel synth --dtype mlx8 / mlx4 (keel's MLX folders)
#   $MODELS/a3b16-q4_k_m.gguf, a3b16-q4_0.gguf, keel-a3b16-mlx4/  the first 16 layers of
#                             Qwen3-30B-A3B (keel synth --layers 16), quantized the same ways
#   $MODELS/a3b16-q5_k_m.gguf llama-quantize --allow-requantize a3b16-q4_k_m.gguf ... Q5_K_M
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/side_by_side.sh [-t THREADS] [-p LENGTHS] [-n GEN] [-d DEPTH] [-r RUNS] [-w PAIRS] [-o OUT]

  -t THREADS  threads for both (default 2)
  -p LENGTHS  prefill lengths, comma-separated (default 512; empty: no prefill)
  -n GEN      decode tokens (default 64; 0: no decode)
  -d DEPTH    tokens in the context before the timed decode (default 512)
  -r RUNS     interleaved runs of each, 3 or more; the median is reported (default 3)
  -w PAIRS    comma-separated, from (default gbf16,gq8,gq4km,gq4,mlx8,mlx4):
                gbf16, gq8, gq4km, gq4  both read the same GGUF file (BF16, Q8_0, Q4_K_M, Q4_0)
                mlx8, mlx4              keel's MLX 8/4-bit folder vs the Q8_0 / Q4_0 file
                moe4km, moe4            Qwen3-30B-A3B's first 16 layers, Q4_K_M / Q4_0, both
                moe5km                  that slice as Q5_K_M, both
                moemlx4                 keel's MLX 4-bit folder of that slice vs its Q4_0 file
                moemxfp4                that slice with MXFP4 experts (llama-quantize MXFP4_MOE: the
                                        rest Q8_0), both
  -o OUT      where the raw files and the summary go (default bench/results/<date>-<machine>)

environment:
  KEEL       keel binary (default: build/keel beside this script's repo)
  KEEL_SIMD_TARGET  run keel's kernels on one SIMD target (AVX2 on an AVX-512 machine); build
             llama.cpp for the same target (docs/performance.md) to compare like with like
  LLAMA_CPP  folder with llama-bench (default /work/llama.cpp/b-native/bin)
  MODELS     folder with the model files (default /tmp/sbs)
EOF
}

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KEEL="${KEEL:-$repo/build/keel}"
LLAMA_CPP="${LLAMA_CPP:-/work/llama.cpp/b-native/bin}"
MODELS="${MODELS:-/tmp/sbs}"

threads=2 lengths=512 gen=64 depth=512 runs=3 pairs="gbf16,gq8,gq4km,gq4,mlx8,mlx4" out=""
while getopts ":t:p:n:d:r:w:o:h" opt; do
  case "$opt" in
    t) threads="$OPTARG" ;; p) lengths="$OPTARG" ;; n) gen="$OPTARG" ;; d) depth="$OPTARG" ;;
    r) runs="$OPTARG" ;; w) pairs="$OPTARG" ;; o) out="$OPTARG" ;;
    h) usage; exit 0 ;;
    :) echo "side_by_side: error: -$OPTARG needs a value" >&2; usage >&2; exit 2 ;;
    *) echo "side_by_side: error: unknown flag -$OPTARG" >&2; usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -gt 0 ]; then echo "side_by_side: error: unexpected argument '$1'" >&2; usage >&2; exit 2; fi

fail() { echo "side_by_side: error: $*" >&2; exit 1; }
# need_count VALUE MIN WHAT: VALUE is a whole number of at least MIN, or the run stops here.
need_count() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ] || fail "$3: '$1' is not a whole number of $2 or more"; }
need_count "$threads" 1 "-t"
need_count "$gen" 0 "-n"
need_count "$depth" 0 "-d"
need_count "$runs" 3 "-r"
IFS=',' read -r -a prefill_lengths <<< "$lengths"
for n in "${prefill_lengths[@]}"; do need_count "$n" 1 "-p"; done
IFS=',' read -r -a pair_names <<< "$pairs"
[ "${#pair_names[@]}" -gt 0 ] || fail "-w: no weight pairs"
[ "${#prefill_lengths[@]}" -gt 0 ] || [ "$gen" -gt 0 ] || fail "nothing to measure (-p empty and -n 0)"

# pair -> what keel reads, what llama.cpp reads
pair_gguf() {
  case "$1" in
    gbf16) echo "$MODELS/q05-bf16.gguf" ;; gq8|mlx8) echo "$MODELS/q05-q8_0.gguf" ;;
    gq4km) echo "$MODELS/q05-q4_k_m.gguf" ;; gq4|mlx4) echo "$MODELS/q05-q4_0.gguf" ;;
    moe4km) echo "$MODELS/a3b16-q4_k_m.gguf" ;; moe4|moemlx4) echo "$MODELS/a3b16-q4_0.gguf" ;;
    moe5km) echo "$MODELS/a3b16-q5_k_m.gguf" ;; moemxfp4) echo "$MODELS/a3b16-mxfp4.gguf" ;;
    *) fail "-w: unknown pair '$1' (expected gbf16, gq8, gq4km, gq4, mlx8, mlx4, moe4km, moe5km, moe4, moemlx4 or moemxfp4)" ;;
  esac
}
pair_keel() {
  case "$1" in
    mlx8) echo "$MODELS/keel-mlx8" ;; mlx4) echo "$MODELS/keel-mlx4" ;; moemlx4) echo "$MODELS/keel-a3b16-mlx4" ;;
    *) pair_gguf "$1" ;;
  esac
}

[ -x "$KEEL" ] || fail "no keel binary at $KEEL (build it, or set KEEL)"
[ -x "$LLAMA_CPP/llama-bench" ] || fail "no llama-bench in $LLAMA_CPP (set LLAMA_CPP)"
for p in "${pair_names[@]}"; do
  k="$(pair_keel "$p")"; g="$(pair_gguf "$p")"
  [ -f "$k/config.json" ] || [ -f "$k" ] || fail "pair $p: no keel model at $k (set MODELS, or make it: docs/performance.md)"
  [ -f "$g" ] || fail "pair $p: no GGUF at $g (set MODELS, or make it: docs/performance.md)"
done

cpu="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
simd="$("$KEEL" bench --model "$(pair_keel "${pair_names[0]}")" --threads 1 --prompt-tokens 1 --gen-tokens 1 \
          --repeats 1 --no-limits 2>/dev/null | awk '$1 == "SIMD" { print $3 }')"
machine="$(echo "$cpu" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//')-${simd,,}-${threads}t"
out="${out:-$repo/bench/results/$(date +%F)-$machine}"
mkdir -p "$out"
keel_commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet 2>/dev/null || echo '+changes')"

# run KIND PAIR TEST I: one process of one side; prints the tokens/s it measured. Its output is
# kept as OUT/<pair>-<test>-<side>-<I>.txt.
run() {
  local side="$1" p="$2" t="$3" i="$4" file="$out/$2-$3-$1-$4.txt" mode="${3%%[0-9]*}" n="${3#pp}"
  [ "$mode" = tg ] && n="${t#tg}"
  local -a cmd
  if [ "$side" = keel ]; then
    cmd=("$KEEL" bench --model "$(pair_keel "$p")" --threads "$threads" --repeats 2 --no-limits)
    if [ "$mode" = pp ]; then cmd+=(--prompt-tokens "$n" --gen-tokens 1); else cmd+=(--prompt-tokens "$((depth > 0 ? depth : 1))" --gen-tokens "$n"); fi
  else
    cmd=("$LLAMA_CPP/llama-bench" -m "$(pair_gguf "$p")" -t "$threads" -r 2 --no-warmup -fa 0,1 -o json)
    if [ "$mode" = pp ]; then cmd+=(-p "$n" -n 0); else cmd+=(-p 0 -n "$n" -d "$depth"); fi
  fi
  { echo "# ${cmd[*]}"; "${cmd[@]}" 2>&1; } > "$file" || fail "$side failed: see $file"
  if [ "$side" = keel ]; then
    local key; [ "$mode" = pp ] && key=prefill || key=decode
    awk -v key="$key" '$1 == key { for (i = 1; i <= NF; ++i) if ($i == "tok/s") { print $(i - 1); exit } }' "$file"
  else  # the best sample of either flash-attention setting
    awk '/"samples_ts"/ { gsub(/.*\[|\].*/, ""); n = split($0, v, ","); for (i = 1; i <= n; ++i) if (v[i] + 0 > best + 0) best = v[i] }
         END { if (best != "") printf "%.2f\n", best }' "$file"
  fi
}

stats() {  # median min max of the numbers on stdin
  sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}

tests=()
for n in "${prefill_lengths[@]}"; do tests+=("pp$n"); done
if [ "$gen" -gt 0 ]; then tests+=("tg$gen"); fi

{
  echo "side_by_side.sh -t $threads -p '$lengths' -n $gen -d $depth -r $runs -w $pairs"
  echo "date:       $(date -u '+%F %T UTC')"
  echo "cpu:        $cpu ($(nproc) cores online), keel SIMD target $simd"
  echo "cpu flags:  $(grep -m1 -o -w -E 'avx2|fma|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|avx512vbmi' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "keel:       $KEEL (commit $keel_commit)"
  echo "llama.cpp:  $LLAMA_CPP/llama-bench"
  echo "restricted: KEEL_SIMD_TARGET=${KEEL_SIMD_TARGET:-unset} (keel bench --target); llama.cpp's own build options are in its CMakeCache.txt"
  echo "models:     $MODELS"
  echo "load before: $(uptime | sed 's/.*load average: //')"
} > "$out/run.txt"

rows=()
for p in "${pair_names[@]}"; do
  for side in keel llama; do run "$side" "$p" "${tests[0]}" 0 > /dev/null; done  # the untimed warm-up
  for t in "${tests[@]}"; do
    keel_tps=() llama_tps=()
    for ((i = 1; i <= runs; ++i)); do
      kt="$(run keel "$p" "$t" "$i")"; [ -n "$kt" ] || fail "no tok/s in $out/$p-$t-keel-$i.txt"
      lt="$(run llama "$p" "$t" "$i")"; [ -n "$lt" ] || fail "no samples_ts in $out/$p-$t-llama-$i.txt"
      keel_tps+=("$kt") llama_tps+=("$lt")
      echo "side_by_side: $p $t run $i/$runs: keel $kt, llama.cpp $lt tok/s" | tee -a "$out/run.txt" >&2
    done
    read -r km kmin kmax <<< "$(printf '%s\n' "${keel_tps[@]}" | stats)"
    read -r lm lmin lmax <<< "$(printf '%s\n' "${llama_tps[@]}" | stats)"
    rows+=("$p;$t;$km;$kmin;$kmax;$lm;$lmin;$lmax")
  done
done
echo "load after: $(uptime | sed 's/.*load average: //')" >> "$out/run.txt"
llama_build="$(cat "$out"/*-llama-1.txt | awk -F'"' '/"build_commit"/ { c = $4 } /"build_number"/ { gsub(/[^0-9]/, "", $3); n = $3 }
                                           END { print c " (build " n ")" }')"
echo "llama.cpp build: $llama_build" >> "$out/run.txt"

{
  echo "keel $keel_commit vs llama.cpp $llama_build, $threads threads, $cpu, keel SIMD target $simd."
  echo "Median of $runs interleaved runs (range in brackets); each run the best of 2 samples; tg after $depth tokens of context."
  echo
  echo "| pair | test | keel tok/s | llama.cpp tok/s | keel / llama.cpp |"
  echo "|---|---|---|---|---|"
  for r in "${rows[@]}"; do
    IFS=';' read -r p t km kmin kmax lm lmin lmax <<< "$r"
    awk -v p="$p" -v t="$t" -v km="$km" -v kmin="$kmin" -v kmax="$kmax" -v lm="$lm" -v lmin="$lmin" -v lmax="$lmax" \
      'BEGIN { printf "| %s | %s | %.1f [%.1f-%.1f] | %.1f [%.1f-%.1f] | %.2fx |\n", p, t, km, kmin, kmax, lm, lmin, lmax, km / lm }'
  done
} > "$out/summary.md"
cat "$out/summary.md"
echo "side_by_side: raw files, commands and machine in $out" >&2
