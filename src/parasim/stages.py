"""The one list of stages: each stage's name, rules, commands, module, results, stats, upstream.

Read by the workflow (``workflow/rules/common.smk``: the `.done` targets of ``rule all``, the stats
a `.done` target and the yield report read), the CLI (each stage's commands), the yield report
(:mod:`parasim.report`) and :mod:`parasim.diagnose`. A stage's ``name`` is the one key used
everywhere: the ``stage`` field of its stats files, the yield report's ``stage`` column,
``parasim summarize --stage`` and its `.done` rule (``<name>_done``).

Adding a stage: one :class:`Stage` here, its rule file (``workflow/rules/<stage>.smk``, included by
the Snakefile) and its module (``src/parasim/<stage>/`` with a ``commands.py`` whose
``register(add, site_opts)`` adds its commands, named after its rules, and writes its
:class:`~parasim.stats.Stats`); a stage of the funnel also gets its sentence in
:mod:`parasim.explain`. The `.done` targets of ``rule all``, the stats they and the yield report
read, the CLI and diagnose follow from the record; ``tests/test_stages.py`` checks it against the
workflow and the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from parasim import explain
from parasim.stats import Stats

__all__ = ["FUNNEL", "STAGES", "Stage", "by_command", "get", "upstream_chain"]

#: How many stats files one stage writes: one per site, one per site and shard, or one in all.
Per = Literal["site", "shard", "global"]


@dataclass(frozen=True)
class Stage:
    """One stage of the workflow.

    Attributes:
        name: the stage's one name (stats' ``stage`` field, yield report, diagnose, `.done`).
        rules: the Snakemake rules doing its work; the first writes its stats.
        module: the package doing the work.
        results: its folders under ``results/`` (every output of its rules lies in one).
        upstream: the stage whose output it reads (None: the first, or it reads many).
        per: its stats files: per site, per site and shard, one in all (None: no stats file).
        done: the results folder of its `.done` target (``results/<done>/<site>.done``, rule
            ``<name>_done``), or None.
        done_covers: the stages before it whose stats its `.done` target summarizes with its own
            (they have no `.done` of their own).
        metric: the yield report's headline figure of the stage: ``rows_out`` or a name in its
            ``counts`` (None: not in the yield report).
        label: the headline's label in the funnel.
        explain: the sentence :mod:`parasim.diagnose` gives when the stage came out empty.
        is_empty: whether its (summed) stats say it came out empty (None: no row out).
        input_from_upstream: its ``rows_in`` counts what the upstream stage passed on, so no row
            in means the upstream gave it nothing (False: its own sentence says more).
        one_to_one: each row in gives at most one row out: ``rows_in == rows_out + drops``.
        commands_module: the module whose ``register(add, site_opts)`` adds its commands
            (None: ``<module>.commands``).
        aliases: command -> the older names it still answers to.
        cache_counts: its counts that say what a cache shared between jobs and runs saved, not
            what came through (translations served from the cache, sentences parsed or found
            parsed): they depend on the order jobs ran in and on what earlier runs left, so the
            yield report leaves them out, as it leaves out timings (the stats files and the
            `.done` summaries keep them).
        done_extras: name -> ``"module:function"`` of the other files its `.done` target writes
            from the site's shards and stats (the divergences' dataset card, the scores' plot):
            ``parasim summarize --extra NAME=PATH`` calls ``function(path, shards, stats, site)``.
    """

    name: str
    rules: tuple[str, ...]
    module: str
    results: tuple[str, ...]
    upstream: str | None = None
    per: Per | None = None
    done: str | None = None
    done_covers: tuple[str, ...] = ()
    metric: str | None = None
    label: str | None = None
    explain: Callable[[str, Stats], str] | None = None
    is_empty: Callable[[Stats], bool] | None = None
    input_from_upstream: bool = True
    one_to_one: bool = False
    commands_module: str | None = None
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    cache_counts: tuple[str, ...] = ()
    done_extras: Mapping[str, str] = field(default_factory=dict)

    @property
    def commands(self) -> tuple[str, ...]:
        """Its commands: ``parasim <rule with hyphens>``, one per rule."""
        return tuple(rule.replace("_", "-") for rule in self.rules)

    @property
    def commands_from(self) -> str:
        """The module that registers its commands."""
        return self.commands_module or f"{self.module}.commands"

    @property
    def done_rule(self) -> str | None:
        """The rule of its `.done` target."""
        return f"{self.name}_done" if self.done else None

    @property
    def stats(self) -> str | None:
        """Its stats file pattern (``{site}``, ``{shard}``), written by its first rule."""
        base = f"results/stats/{self.rules[0]}"
        return {
            "site": f"{base}/{{site}}.json",
            "shard": f"{base}/{{site}}/{{shard}}.json",
            "global": f"{base}.json",
            None: None,
        }[self.per]

    def stats_files(self, site: str, shards: list[str]) -> list[str]:
        """Its stats files for one site (per-site and per-shard stages)."""
        if self.per not in ("site", "shard"):
            raise ValueError(f"stage {self.name} has no stats per site")
        files = [self.stats.format(site=site, shard=shard) for shard in shards]
        return list(dict.fromkeys(files))

    def empty(self, stats: Stats) -> bool:
        """Whether ``stats`` (its own, summed) say it came out empty."""
        return self.is_empty(stats) if self.is_empty else not stats.rows_out


STAGES: tuple[Stage, ...] = (
    Stage(
        "crawl",
        rules=("crawl_site",),
        module="parasim.crawl",
        results=("pages",),
        per="site",
        metric="rows_out",
        label="pages crawled",
        explain=explain.crawl,
        input_from_upstream=False,
        one_to_one=True,
        aliases={"crawl-site": ("crawl",)},
    ),
    Stage(
        "pair",
        rules=("pair_pages",),
        module="parasim.pair",
        results=("pairs",),
        upstream="crawl",
        per="site",
        done="pairs",
        metric="rows_out",
        label="page pairs",
        explain=explain.pair,
        # rows in: English pages x other languages; none when the crawl found no English page
        input_from_upstream=False,
        one_to_one=True,
        aliases={"pair-pages": ("pair",)},
    ),
    Stage(
        "parse",
        rules=("parse_pages",),
        module="parasim.parse",
        results=("lines",),
        upstream="pair",
        per="shard",
        done="lines",
        metric="rows_out",
        label="pairs parsed",
        explain=explain.parse,
        one_to_one=True,
        aliases={"parse-pages": ("parse",)},
    ),
    Stage(
        "translate",
        rules=("translate_lines",),
        module="parasim.translate",
        results=("translated",),
        upstream="parse",
        per="shard",
        done="translated",
        metric="lines_translated",
        label="lines translated",
        explain=explain.translate,
        is_empty=explain.translate_is_empty,
        one_to_one=True,
        aliases={"translate-lines": ("translate",)},
        # sent to the backend or read from the shared translation cache: which job translated a
        # line first, and what earlier runs cached, decide (``lines_translated`` does not)
        cache_counts=("cache_hits", "translated", "retries", "backend_calls", "resplits"),
    ),
    Stage(
        "align",
        rules=("align_lines", "static_encoder"),
        module="parasim.align",
        results=("aligned", "models/static-encoder"),
        upstream="translate",
        per="shard",
        metric="rows_out",
        label="aligned pairs",
        explain=explain.align,
        aliases={"align-lines": ("align",)},
    ),
    Stage(
        "clean",
        rules=("clean_positives",),
        module="parasim.clean",
        results=("positives", "dropped"),
        upstream="align",
        per="site",
        done="positives",
        done_covers=("align",),
        metric="rows_out",
        label="positives (cleaned)",
        explain=explain.clean,
        one_to_one=True,
        aliases={"clean-positives": ("clean",)},
    ),
    Stage(
        "topics",
        rules=("fit_topics", "fit_topics_partition"),
        module="parasim.negatives",
        results=("topics",),
        upstream="clean",
        per="global",
    ),
    Stage(
        "negatives",
        rules=("select_negatives", "select_negatives_partition"),
        module="parasim.negatives",
        results=("negatives",),
        upstream="topics",
        per="global",
    ),
    Stage(
        "corpus",
        rules=("build_corpus",),
        module="parasim.corpus",
        results=("corpus",),
        upstream="negatives",
        per="global",
        one_to_one=True,
    ),
    Stage(
        "divergences",
        rules=("make_divergences",),
        module="parasim.divergences",
        results=("divergences",),
        upstream="clean",
        per="shard",
        done="divergences",
        metric="rows_out",
        label="divergence rows",
        explain=explain.divergences,
        aliases={"make-divergences": ("divergences",)},
        done_extras={"card": "parasim.divergences.stage:write_site_card"},
    ),
    Stage(
        "scores",
        rules=("score_pairs",),
        module="parasim.scores",
        results=("scores",),
        upstream="clean",
        per="shard",
        done="scores",
        metric="pairs_scored",
        label="pairs scored",
        explain=explain.scores,
        input_from_upstream=False,
        done_extras={"png": "parasim.scores.plot:plot_site"},
        # the AMR parse cache, the entity cache and the vector cache are shared by a site's
        # shards (and kept between runs): which shard parsed a shared sentence first decides
        cache_counts=(
            "sentences_parsed",
            "sentences_cached",
            "entity_texts_parse",
            "entity_texts_cached",
            "entity_texts_ner",
            "embedding_texts_encoded",
            "embedding_texts_cached",
        ),  # fmt: skip
    ),
    Stage(
        "report",
        rules=("yield_report",),
        module="parasim.report",
        results=("report",),
    ),
    # The model families (rules in workflow/rules/train.smk, similarity.smk, entity_siamese.smk,
    # align_encoder.smk): no stats file, no `.done`; their commands still answer to the names
    # they had before they were named after their rules.
    Stage(
        "ranker",
        rules=("train_divergence_ranker", "eval_divergence_ranker"),
        module="parasim.train.ranker",
        results=("models/divergence-ranker", "eval/divergence-ranker"),
        upstream="divergences",
        aliases={
            "train-divergence-ranker": ("train-ranker",),
            "eval-divergence-ranker": ("eval-ranker",),
        },
    ),
    Stage(
        "s3bert",
        rules=("train_s3bert",),
        module="parasim.train.s3bert",
        results=("models/s3bert",),
        upstream="scores",
    ),
    Stage(
        "similarity",
        rules=("train_similarity", "eval_similarity_msrp", "similarity_report"),
        module="parasim.train.similarity",
        results=("models/similarity", "eval/similarity"),
        upstream="corpus",
        aliases={"similarity-report": ("similarity-table",)},
    ),
    Stage(
        "entity_siamese",
        rules=("train_entity_siamese",),
        module="parasim.train.entity_siamese",
        results=("models/entity-siamese", "eval/entity-siamese"),
        upstream="corpus",
    ),
    Stage(
        "align_encoder",
        rules=("align_encoder_wordpairs", "train_align_encoder", "eval_align_encoder"),
        module="parasim.train.align_encoder",
        results=("align_encoder", "models/aligned-encoder", "eval/aligned-encoder"),
        upstream="clean",
        aliases={
            "align-encoder-wordpairs": ("align-wordpairs",),
            "eval-align-encoder": ("eval-cwr",),
        },
    ),
    # every trained model's figure, untrained baseline and verdict in one table (issue 34)
    Stage(
        "models_table",
        rules=("models_table",),
        module="parasim.train.table",
        results=("models/README.md", "models/table.json"),
    ),
)

_BY_NAME = {s.name: s for s in STAGES}

#: The per-site stages in the order rows flow through them: the yield report's funnel, and the
#: order in which diagnose looks for the earliest empty stage of a site.
FUNNEL: tuple[Stage, ...] = tuple(s for s in STAGES if s.per in ("site", "shard"))


def get(name: str) -> Stage:
    """The stage called ``name``.

    Raises:
        KeyError: naming the known stages.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no stage {name!r}; the stages: {', '.join(_BY_NAME)}") from None


def upstream_chain(name: str) -> list[Stage]:
    """The stages before ``name``, following ``upstream`` back to the first, in flow order."""
    out: list[Stage] = []
    up = get(name).upstream
    while up is not None:
        out.append(get(up))
        up = out[-1].upstream
    return out[::-1]


def by_command(command: str) -> tuple[str, tuple[str, ...]] | None:
    """``(command, its aliases)`` for a stage command or one of its older names; else None."""
    for stage in STAGES:
        for cmd in stage.commands:
            aliases = tuple(stage.aliases.get(cmd, ()))
            if command == cmd or command in aliases:
                return cmd, aliases
    return None
