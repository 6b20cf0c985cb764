#!/bin/sh
# The trend chart of docs/nightly.md (docs/screenshots.sh --with-trend copies it there): ten short sweeps against
# the embedded simulator, its KV cache cut from 176 to 120 blocks after the fifth (the capacity lowered part-way
# through), then 'locust-llm trend' over the kept reports.
#   sh docs/trend-demo.sh [OUT]      (about 8 minutes; OUT defaults to runs/trend-demo)
set -eu
out="${1:-runs/trend-demo}"
mkdir -p "$out"
for i in 1 2 3 4 5 6 7 8 9 10; do
  kv=176
  [ "$i" -gt 5 ] && kv=120
  night="$out/run-$(printf %02d "$i")"
  locust -f locustfile.py --headless --steps 8,16,32,64 --step-duration 12s --max-tokens 64 --seed "$i" \
    --sim-args "--kv-blocks $kv" --csv "$night/run" --llm-report "$night/report" --only-summary \
    --exit-code-on-error 0 > "$night.log" 2>&1 || true
  echo "run $i (kv-blocks $kv): $(grep -m1 'recommended max' "$night.log" || echo 'no summary')"
done
locust-llm trend "$out" --out "$out" --window 10 || echo "trend exit code $?"
# the picture (Debian's chromium, headless)
if command -v chromium > /dev/null; then
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$out/.profile" \
    --virtual-time-budget=15000 --window-size=1200,1700 --screenshot="$out/trend.png" "file://$(realpath "$out")/trend.html" \
    > /dev/null 2>&1 && echo "screenshot: $out/trend.png"
fi
