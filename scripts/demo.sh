#!/usr/bin/env bash
# Set everything up, then run the demo: fill the gaps of a real USGS elevation grid (shipped with
# matplotlib), write the prediction GeoTIFF + map, and print hold-out RMSE and coverage.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/geogp demo --out-dir out/demo "$@"
