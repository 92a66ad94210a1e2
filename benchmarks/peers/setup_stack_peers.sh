#!/usr/bin/env bash
# The image-stack peers of stack_peers.py, each in its own environment (never geogp's):
#   - R (Debian's r-base-core) with gapfill's dependencies from Debian, and gapfill itself in
#     benchmarks/peers/.rlib: from a source directory when $GAPFILL_SRC names one (e.g. a clone
#     of https://github.com/florafauna/gapfill: its gapfill/ folder), else from CRAN, else
#     from GitHub's tarball;
#   - pyDINEOF (PyPI) in benchmarks/peers/.venv-dineof.
#
#   bash benchmarks/peers/setup_stack_peers.sh                       # as root, for apt-get
#   GAPFILL_SRC=/path/to/gapfill/gapfill bash benchmarks/peers/setup_stack_peers.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RLIB="$HERE/.rlib"
PY="${PYTHON:-python3}"

# R, a compiler for gapfill's C++ and its dependencies; python3-venv for pyDINEOF's venv
APT=(r-base-core r-base-dev r-cran-rcpp r-cran-foreach r-cran-ggplot2 r-cran-fields
     r-cran-quantreg python3-venv)
if ! dpkg -s "${APT[@]}" > /dev/null 2>&1; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${APT[@]}"
fi
mkdir -p "$RLIB"
if [ ! -d "$RLIB/gapfill" ]; then
    if [ -n "${GAPFILL_SRC:-}" ]; then
        R CMD INSTALL --library="$RLIB" "$GAPFILL_SRC"
    elif ! Rscript -e "install.packages('gapfill', lib = '$RLIB', repos = 'https://cloud.r-project.org')" \
            || [ ! -d "$RLIB/gapfill" ]; then
        tmp="$(mktemp -d)"
        trap 'rm -rf "$tmp"' EXIT
        curl -fsSL https://github.com/florafauna/gapfill/archive/refs/heads/master.tar.gz \
            | tar xz -C "$tmp"
        R CMD INSTALL --library="$RLIB" "$tmp"/gapfill-master/gapfill
    fi
fi
Rscript -e "library('gapfill', lib.loc = '$RLIB'); cat('gapfill', format(packageVersion('gapfill', lib.loc = '$RLIB')), '\n')"

# a venv left without pip by an earlier failed attempt is made again
if ! "$HERE/.venv-dineof/bin/python" -m pip --version > /dev/null 2>&1; then
    rm -rf "$HERE/.venv-dineof"
    "$PY" -m venv "$HERE/.venv-dineof"
fi
"$HERE/.venv-dineof/bin/python" -m pip install --quiet pyDINEOF==0.1.1
"$HERE/.venv-dineof/bin/python" -c "from importlib.metadata import version; print('pyDINEOF', version('pyDINEOF'))"
