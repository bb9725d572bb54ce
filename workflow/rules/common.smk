# Helpers shared by all rule files (validated config, shard listing, wildcard patterns,
# input functions). Nothing else lives here.

import json
import os
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from parasim.config import ConfigError, validate_config

try:
    _validated = validate_config(config)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
config.clear()
config.update(_validated)

# Jobs call the `parasim` command installed beside this Snakemake (e.g. .venv/bin), also when the
# environment is not activated; a rule's conda env, when used, is put in front of it.
os.environ.update(
    PATH=os.pathsep.join([str(Path(sys.executable).parent), os.getenv("PATH", "")])
)

SITES = [s["name"] for s in config["sites"]]
_width = max(3, len(str(config["shards"] - 1)))
SHARDS = [f"{i:0{_width}d}" for i in range(config["shards"])]
#: Per-site stage summaries `rule all` asks for (each fails on zero rows unless allow_empty).
STAGE_TARGETS = ["pairs", "lines", "translated", "positives"]
#: Per-shard jobs whose stats the yield report reads (a stage added later appends itself).
REPORTED_SHARD_JOBS = [
    "parse_pages",
    "translate_lines",
    "align_lines",
    "make_divergences",
]
SRC = Path(workflow.basedir) / "src" / "parasim"
SITE_RE = "|".join(re.escape(s) for s in SITES)
SHARD_RE = r"\d{%d}" % _width


def site_json(wildcards):
    """The site's validated config as JSON (a param: editing it reruns the site's stages)."""
    return json.dumps(next(s for s in config["sites"] if s["name"] == wildcards.site))


def section_json(name):
    """A top-level config section as JSON, for `parasim <stage> --settings-json`."""
    return json.dumps(config[name], sort_keys=True)


def code(*modules):
    """Source files of the stage's module(s): editing the code reruns the stage."""
    out = []
    for m in modules:
        p = SRC / m
        out += (
            sorted(str(f) for f in p.rglob("*.py")) if p.is_dir() else [str(p) + ".py"]
        )
    return out


def shard_files(stage, ext="parquet"):
    """All shard outputs of a per-shard stage for one site (an input function)."""

    def _files(wildcards):
        return [f"results/{stage}/{wildcards.site}/{shard}.{ext}" for shard in SHARDS]

    return _files


def stats_files(job_name):
    """All per-shard stats files of one rule, for one site (an input function)."""

    def _files(wildcards):
        return [
            f"results/stats/{job_name}/{wildcards.site}/{shard}.json"
            for shard in SHARDS
        ]

    return _files


def allow_empty_flag():
    """`--allow-empty` for `parasim summarize` when the config allows empty stages."""
    return "--allow-empty" if config["allow_empty"] else ""


#: The divergence ranker's folder (workflow/rules/train.smk).
RANKER_DIR = "results/models/divergence-ranker"


def refresd_dir():
    """REFreSD dev: `train.refresd`, or the project's real-data folder beside the checkout."""
    return config["train"]["refresd"] or str(
        Path(workflow.basedir).parent / "shared" / "data" / "refresd"
    )
