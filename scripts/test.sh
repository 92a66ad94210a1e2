#!/usr/bin/env bash
# Set everything up, then run the whole test suite (under 15 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
