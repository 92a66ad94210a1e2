#!/usr/bin/env bash
# Install everything geogp needs on a fresh Debian/Ubuntu machine (run as root, or with sudo
# available): the CHOLMOD headers (libsuitesparse-dev) and a C compiler for scikit-sparse, an
# optimised BLAS for CHOLMOD (OpenBLAS: Debian's default reference BLAS makes the sparse
# factorisations and solves 4-5 times slower), then a virtual environment in .venv with geogp
# and its test, lint and docs extras, at the versions of requirements/constraints.txt (what CI tested).
# Safe to run again: it skips what is already there.
#   --latest   the newest releases instead, in .venv-latest (to check them before re-locking)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
constraints=(-c requirements/constraints.txt)
if [ "${1:-}" = "--latest" ]; then
  venv=.venv-latest
  constraints=()
fi

need_apt=()
[ -f /usr/include/suitesparse/cholmod.h ] || need_apt+=(libsuitesparse-dev)
command -v gcc >/dev/null 2>&1 || need_apt+=(build-essential)
# installing it makes it the system's libblas.so.3 / liblapack.so.3 (update-alternatives);
# grep without -q reads all of ldconfig's output (-q would stop early: SIGPIPE under pipefail)
ldconfig -p 2>/dev/null | grep 'libopenblas\.so\.0' >/dev/null || need_apt+=(libopenblas0-pthread)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || need_apt+=(python3-venv)
python3 -c "import sysconfig, os, sys; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')) else 1)" \
  >/dev/null 2>&1 || need_apt+=(python3-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[geogp setup] installing system packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "[geogp setup] creating $venv"
  python3 -m venv "$venv"
fi
stamp="$venv/.geogp-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ requirements/constraints.txt -nt "$stamp" ]; then
  echo "[geogp setup] installing geogp and dependencies into $venv (first time: a few minutes)"
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$venv/bin/python" -m pip install -q "${constraints[@]}" -e ".[test,lint,docs]"
  touch "$stamp"
fi
echo "[geogp setup] ready in $venv: $("$venv/bin/python" -c 'import geogp, jax, numpy, scipy; print("geogp", geogp.__version__, "| jax", jax.__version__, "| numpy", numpy.__version__, "| scipy", scipy.__version__)')"
