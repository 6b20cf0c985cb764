#!/bin/sh
# The pictures of the README and docs/, made again from real runs after a change to the report or the web UI:
#   report.png      a sweep of the embedded simulator past its knee, report.html shot by headless Chromium;
#   webui-*.png     the web UI during and after a sweep, driven by headless Chromium through Playwright
#                   (tests/integration/test_webui_browser.py with LOCUST_LLM_UPDATE_DOCS=1);
#   trend.png       with --with-trend: docs/trend-demo.sh (ten sweeps, about 8 minutes more).
# Usage: sh docs/screenshots.sh [--with-trend]      (about 4 minutes; needs Debian's chromium and '.[dev]')
set -eu
cd "$(dirname "$0")/.."
out=runs/screenshots
mkdir -p "$out"
locust -f locustfile.py --headless --steps 8,16,32,64,128 --step-duration 15s --seed 7 --csv "$out/run" \
  --llm-report "$out/report" --exit-code-on-error 0 > "$out/run.log" 2>&1 || true
grep -m1 'recommended max' "$out/run.log"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$out/.profile" \
  --virtual-time-budget=15000 --window-size=1280,1400 --screenshot=docs/report.png \
  "file://$(realpath "$out")/report/report.html" > /dev/null 2>&1
echo "docs/report.png"
LOCUST_LLM_UPDATE_DOCS=1 python -m pytest -q -p no:cacheprovider tests/integration/test_webui_browser.py
echo "docs/webui-tab.png, docs/webui-live.png"
if [ "${1:-}" = "--with-trend" ]; then
  sh docs/trend-demo.sh "$out/trend"
  cp "$out/trend/trend.png" docs/trend.png
  echo "docs/trend.png"
fi
