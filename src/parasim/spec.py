"""What a stage is: the record every stage's ``stage.py`` exports as ``SPEC``.

A stage's module (``src/parasim/<stage>/stage.py``) ends with its :class:`Stage`: its name, its
rules, its settings class, the schemas it reads and writes, its function, the sentence that
explains it when it came out empty, and where its results and stats lie. :mod:`parasim.stages`
gathers them; the workflow (``workflow/rules/common.smk``), the CLI, the yield report and
:mod:`parasim.diagnose` read them there. This module imports nothing of parasim but the stats, so
that every stage can import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from parasim.stats import Stats

__all__ = ["Per", "Stage"]

#: How many stats files one stage writes: one per site, one per site and shard, or one in all.
Per = Literal["site", "shard", "global"]


@dataclass(frozen=True)
class Stage:
    """One stage of the workflow.

    Attributes:
        name: the stage's one name (stats' ``stage`` field, yield report, diagnose, `.done`).
        rules: the Snakemake rules doing its work; the first writes its stats.
        module: the package doing the work: the one whose ``stage.py`` exports the record
            (:mod:`parasim.stages` fills it in; a record may leave it out).
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
        settings: its settings class (a :class:`parasim.config.Settings`; its ``section`` is the
            stage's config section), or None (a stage without settings of its own).
        inputs: what it reads: the command's option (``--<name>``) -> the schema of the table
            (from :mod:`parasim.io`; None: not a table, e.g. a folder of models).
        outputs: what it writes, likewise.
        run: the stage function: it takes its inputs, its settings and a
            :class:`~parasim.stats.Recorder`, and returns only its outputs.
    """

    name: str
    rules: tuple[str, ...]
    results: tuple[str, ...]
    module: str | None = None
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
    settings: type | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    outputs: Mapping[str, Any] = field(default_factory=dict)
    run: Callable[..., Any] | None = None

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
