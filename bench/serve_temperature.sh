#!/bin/bash
# Decode through keel serve at temperature 0 and at temperature 1 (Claude Code's), the same prompt
# twice each, so the sampler's share of a token shows beside the forward pass's. Prints keel
# serve's line for each request (its wall time for the prompt and the tokens).
#   bench/serve_temperature.sh [KEEL_BINARY] [MODEL] [TOKENS]
set -euo pipefail
BIN=${1:-build/keel}
MODEL=${2:-/tmp/sbs/q05-q4_0.gguf}
TOKENS=${3:-128}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp)
"$BIN" serve --model "$MODEL" --port "$PORT" --threads 2 --alias '*' >"$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; rm -f "$LOG"' EXIT
for _ in $(seq 1 120); do curl -sf "localhost:$PORT/health" >/dev/null && break; sleep 1; done
for t in 0 1 0 1; do
  curl -sf "localhost:$PORT/v1/chat/completions" -H 'content-type: application/json' -d \
    '{"model":"m","messages":[{"role":"user","content":"Write a long story about a lighthouse keeper."}],"max_tokens":'"$TOKENS"',"temperature":'"$t"',"seed":5}' \
    | python3 -c "import json,sys; print('temperature $t:', json.load(sys.stdin)['usage']['completion_tokens'], 'tokens')"
done
grep "keel serve: POST" "$LOG"
