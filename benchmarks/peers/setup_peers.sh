#!/usr/bin/env bash
# Create benchmarks/peers/.venv (gitignored) with the peer GP libraries used by run_peers.py.
#
# The peers are NOT runtime dependencies of geogp: they live in this separate venv only.
# geogp itself is installed editable into it so that run_peers.py shares heaton_cv.py's folds
# and geogp.core.metrics with the main benchmarks (peers are scored by the same code).
#
#   bash benchmarks/peers/setup_peers.sh            # torch (CPU) + gpytorch + pykrige + gpflow
#   SKIP_GPFLOW=1 bash benchmarks/peers/setup_peers.sh   # without tensorflow/gpflow
#
# torch is pinned to 2.13.0 and installed FIRST, from the CPU-only index, so that pip never
# resolves a CUDA build (several GB) when gpytorch asks for torch. On machines whose pip
# configuration already has a local CPU wheel of torch 2.13.0 (find-links), that one is used.
# tensorflow-cpu (for GPflow) is large (~250 MB); failures of the GPflow step are reported
# and skipped, the rest of the peers still work.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$HERE/.venv"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --quiet)
"${PIP[@]}" --upgrade pip wheel  # setuptools: pinned < 81 in step 4 (GPflow)

# 1. torch, CPU build only (never a CUDA wheel). First ask pip, without installing, which
#    torch==2.13.0 it would pick from the configured sources: if that is a "+cpu" wheel (a local
#    CPU wheel in find-links, as on the reference machine), install it as configured. Otherwise
#    install from the CPU-only index ($TORCH_INDEX, default the PyTorch CPU index), which holds
#    no CUDA build. PyPI's default Linux torch wheel pulls several GB of CUDA libraries.
TORCH_INDEX="${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    pick="$("$VENV/bin/python" -m pip install --quiet --dry-run --no-deps --ignore-installed \
            --report - "torch==2.13.0" 2>/dev/null \
            | "$VENV/bin/python" -c "import json,sys; r=json.load(sys.stdin); print(r['install'][0]['metadata']['version'])" \
            || true)"
    echo "pip would pick torch ${pick:-<nothing>} from the configured sources"
    if [[ "$pick" == *+cpu ]]; then
        "${PIP[@]}" "torch==2.13.0"
    else
        "${PIP[@]}" --retries 1 --timeout 30 "torch==2.13.0" --index-url "$TORCH_INDEX" \
            --extra-index-url https://pypi.org/simple
    fi
fi
"$VENV/bin/python" - <<'PY'
import torch
assert torch.version.cuda is None, f"a CUDA build of torch was installed ({torch.version.cuda}); remove the venv"
print("torch", torch.__version__, "CPU build")
PY

# 2. gpytorch (keeps the torch already installed) and PyKrige.
"${PIP[@]}" gpytorch pykrige

# 3. geogp itself (editable), for the shared folds/metrics; its own dependencies come along.
"${PIP[@]}" -e "$ROOT"

# 4. GPflow on tensorflow-cpu (optional). GPflow 2.10+ pins numpy < 2, which geogp's stack
#    (jax) does not accept, so pip resolves GPflow 2.9.x here; that version imports
#    pkg_resources, which setuptools 81 removed: hence setuptools < 81.
if [ -z "${SKIP_GPFLOW:-}" ]; then
    if "${PIP[@]}" tensorflow-cpu tf-keras "gpflow<2.10" "setuptools<81"; then
        "$VENV/bin/python" -c "import gpflow, tensorflow as tf; print('gpflow', gpflow.__version__, 'tensorflow', tf.__version__)" \
            || echo "WARNING: gpflow installed but does not import; run_peers.py will skip it."
    else
        echo "WARNING: could not install tensorflow-cpu/gpflow; run_peers.py will skip GPflow."
    fi
fi
"$VENV/bin/python" -c "import gpytorch, pykrige, geogp; print('gpytorch', gpytorch.__version__, 'pykrige', pykrige.__version__, 'geogp ok')"
echo "peers venv ready: $VENV"
