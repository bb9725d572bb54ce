# Helpers shared by all rule files (validated config, shard listing, wildcard patterns,
# input functions). Nothing else lives here: what a stage is (its rules, results, stats, upstream)
# comes from the one list of stages, parasim.stages.

import json
import shlex
import os
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from parasim import stages
from parasim.config import ConfigError, validate_config
from parasim.partition import site_partitions
from parasim.preflight import check_installed

try:
    _validated = validate_config(config)
    check_installed(_validated)  # backend and spaCy models cover every site's languages
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
#: The results folders of the per-site `.done` targets `rule all` asks for (each fails on zero
#: rows unless allow_empty).
DONE_TARGETS = [s.done for s in stages.STAGES if s.done]
SRC = Path(workflow.basedir) / "src" / "parasim"
#: Partition -> its sites, from the config (each site's `en-<lang>` pairs and domain): the
#: per-partition jobs of the topics stage are known when the DAG is built.
PARTITION_SITES = site_partitions(config["sites"], config["corpus"]["partitions"])
PARTITIONS = list(PARTITION_SITES)
PARTITION_RE = "|".join(re.escape(p) for p in PARTITIONS)
SITE_RE = "|".join(re.escape(s) for s in SITES)
SHARD_RE = r"\d{%d}" % _width


def site_entry(wildcards):
    """The site's entry of the validated config."""
    return next(s for s in config["sites"] if s["name"] == wildcards.site)


def site_json(wildcards):
    """The site's validated config as JSON (a param: editing it reruns the site's stages).

    Keys sorted, as in `section_json`: the order of the keys in a config file changes nothing.
    """
    return json.dumps(site_entry(wildcards), sort_keys=True)


def section_json(name):
    """A top-level config section as JSON, for `parasim <stage> --settings-json`."""
    return json.dumps(config[name], sort_keys=True)


def pairs_by_content(wildcards):
    """Whether the site's pairing.evidence holds content."""
    return "content" in site_entry(wildcards).get("pairing", {}).get("evidence", ())


def content_input(wildcards):
    """The static encoder's build record, for a site that pairs by content with it."""
    static = config["content_pairing"]["encoder"] in ("e5-static", "static")
    return (
        ["results/models/static-encoder/build.json"]
        if static and pairs_by_content(wildcards)
        else []
    )


def content_args(wildcards):
    """`--content-json` and `--align-json` for a site that pairs by content, else nothing: the
    other sites' pairing does not read those sections, nor reruns when they change."""
    if not pairs_by_content(wildcards):
        return ""
    return " ".join(
        f"--{flag} {shlex.quote(section_json(name))}"
        for flag, name in (("content-json", "content_pairing"), ("align-json", "align"))
    )


def code(*modules):
    """Source files of the stage's module(s): editing the code reruns the stage."""
    out = []
    for m in modules:
        p = SRC / m
        out += (
            sorted(str(f) for f in p.rglob("*.py")) if p.is_dir() else [str(p) + ".py"]
        )
    return out


def partition_positives(wildcards):
    """The positives shards of the sites of one partition (an input function)."""
    return expand(
        "results/positives/{site}/{shard}.parquet",
        site=PARTITION_SITES[wildcards.partition],
        shard=SHARDS,
    )


def shard_files(stage, ext="parquet"):
    """All shard outputs of a per-shard stage for one site (an input function)."""

    def _files(wildcards):
        return [f"results/{stage}/{wildcards.site}/{shard}.{ext}" for shard in SHARDS]

    return _files


def stats_files(*names):
    """The stats files of the stages `names` (per site or per shard), for one site (an input
    function)."""

    def _files(wildcards):
        out = []
        for name in names:
            out += stages.get(name).stats_files(wildcards.site, SHARDS)
        return out

    return _files


def done_stats(name):
    """The stats a stage's `.done` target adds up: its own and those of the stages it covers."""
    return stats_files(*stages.get(name).done_covers, name)


def upstream_stats(name, also=()):
    """Stats files of the stages before `name` (those its `.done` does not cover) and of the
    stages `also` names, for one site: they explain, in one sentence, why the stage has no rows
    (parasim.diagnose)."""
    covered = set(stages.get(name).done_covers)
    before = [s.name for s in stages.upstream_chain(name) if s.name not in covered]
    return stats_files(*before, *also)


def allow_empty_flag():
    """`--allow-empty` for `parasim summarize` when the config allows empty stages."""
    return "--allow-empty" if config["allow_empty"] else ""
