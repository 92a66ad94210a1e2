#!/usr/bin/env bash
# Set everything up, lint with ruff (pyproject.toml's rules), type-check with mypy, build the docs
# site, then run the whole test suite (under 15 minutes on 2 cores).
#   bash scripts/test.sh            the locked versions (requirements/constraints.txt), in .venv
#   bash scripts/test.sh --latest   the newest releases, in .venv-latest
# Further arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
if [ "${1:-}" = "--latest" ]; then
  venv=.venv-latest
  shift
  bash scripts/setup.sh --latest
else
  bash scripts/setup.sh
fi
# ruff first: a second or two, and a finding fails the run before the long part
echo "[geogp test] ruff check (version $("$venv/bin/ruff" --version | cut -d' ' -f2))"
"$venv/bin/ruff" check .
# the type checker on the family contract, placement and the models (pyproject.toml's [tool.mypy])
echo "[geogp test] mypy (version $("$venv/bin/mypy" --version | cut -d' ' -f2))"
"$venv/bin/mypy"
# the documentation site, warnings as errors (mkdocs.yml: strict); the site goes to .cache/site
echo "[geogp test] mkdocs build --strict"
NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --strict --quiet
# three workers (pytest-xdist) on 2 cores, one test file each at a time (module fixtures built
# once): a third worker fills the time the others wait (subprocesses, dask clusters starting,
# the last files): 11:29 against 12:41 with two in fresh clones (2026-11-29)
# one BLAS thread per worker: the workers already fill the two cores, and OpenBLAS threads on
# top of them only compete (CHOLMOD links the system OpenBLAS that setup.sh installs)
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
# XLA's backend optimisations off: most tests are small and their time is compiling (12 % off
# test_lattice.py, the same time for a 200 × 200 fit; numbers agree to rounding)
export XLA_FLAGS="${XLA_FLAGS:-} --xla_backend_optimization_level=0"
# XLA's compiled programs in a cache on disk that both workers share (and later runs reuse):
# many tests compile the same programs, and each worker process otherwise compiles them again
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$PWD/.cache/jax}"
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="${JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS:-0}"
# --no-loadscope-reorder: take the files in tests/conftest.py's order (slowest first), not
# xdist's by number of tests
exec "$venv/bin/python" -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder "$@"
