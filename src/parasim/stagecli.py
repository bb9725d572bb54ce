"""The one way a stage command runs (`parasim <stage> ...`), below every stage.

Each stage's ``commands.py`` turns its options into its inputs and settings and runs one job of
the stage inside :func:`stage_job`: a :class:`~parasim.stats.Recorder` for the stage function to
count into, its stats written (``--stats``) when the job succeeds, and a bad input (a missing or
unreadable file, a table without a column the stage reads, a value the stage rejects) turned into
one sentence naming the culprit (:class:`UsageError`, exit status 2). :func:`read_input` reads an
input table the same way for every stage. ``parasim.cli`` only builds the parser and dispatches;
no stage imports it.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parasim.config import (
    SiteConfig,
    load_config,
    site_by_name,
    validate_config,
    validate_section,
)
from parasim.stats import Recorder, Stats

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("parasim")


class UsageError(Exception):
    """A problem the user can fix; reported as one line, exit status 2."""


def site_from_args(args: argparse.Namespace) -> SiteConfig:
    """The site from --site-json, or from --config + --site."""
    if getattr(args, "site_json", None):
        raw = json.loads(args.site_json)
        cfg = validate_config({"sites": [raw]})
        return SiteConfig.from_dict(cfg["sites"][0])
    if getattr(args, "config", None) and getattr(args, "site", None):
        return site_by_name(load_config(args.config), args.site)
    raise UsageError("give --site-json, or --config FILE with --site NAME")


def section_from_args(args: argparse.Namespace, name: str) -> dict:
    """A validated top-level config section from --settings-json or --config (defaults filled)."""
    if getattr(args, "settings_json", None):
        return validate_section(name, json.loads(args.settings_json))
    if getattr(args, "config", None):
        return load_config(args.config)[name]
    return validate_section(name, {})


def write_stats(path: str | None, stats: Stats | Mapping[str, Any]) -> None:
    """Log a job's counts and write them atomically as JSON to ``path`` (when given).

    A :class:`~parasim.stats.Stats` keeps its fields' order; a plain mapping (a model's metrics)
    is written with sorted keys.
    """
    if isinstance(stats, Stats):
        text = json.dumps(stats.to_dict(), indent=2, default=str)
    else:
        text = json.dumps(stats, indent=2, sort_keys=True, default=str)
    log.info("stats: %s", json.dumps(json.loads(text), separators=(",", ":")))
    if path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(text + "\n", encoding="utf-8")
        tmp.replace(p)


def read_stats(paths: Sequence[str]) -> list[Stats]:
    """The stats files at ``paths``; a UsageError naming a missing or unreadable one."""
    out = []
    for p in paths:
        try:
            out.append(Stats.read(need(p, "stats file")))
        except (ValueError, TypeError) as exc:
            raise UsageError(str(exc)) from None
    return out


def need(path: str, what: str) -> Path:
    """``path`` as a Path, or a UsageError naming ``what`` is missing."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{what} not found: {p}")
    return p


@contextmanager
def stage_job(
    stage: str,
    stats: str | None,
    site: str | None = None,
    culprit: str | None = None,
    rounding: int | None = None,
) -> Iterator[Recorder]:
    """One job of ``stage``: yields the recorder its function counts into; writes its stats.

    Args:
        stage: the stage's name (:mod:`parasim.stages`).
        stats: where to write the job's stats (``--stats``; None: logged only).
        site: the site, where the job is one site's.
        culprit: the input the job reads (a file): a ``ValueError`` the stage raises about it
            (a missing column, a bad value) becomes one sentence naming it. Without it, errors
            propagate.
        rounding: round its timings to this many digits (the stage's own precision).

    The stats are written only when the job succeeds: a failed job leaves no stats file that
    could pass for a finished one.
    """
    rec = Recorder(stage, site=site)
    try:
        yield rec
    except ValueError as exc:
        if culprit is None:
            raise
        raise UsageError(f"{culprit}: {exc}") from None
    write_stats(stats, rec.stats(rounding))


def read_input(
    path: str | Path,
    what: str,
    columns: Sequence[str] | None = None,
    schema: pa.Schema | None = None,
    require: Sequence[str] = (),
    **kwargs: Any,
) -> pa.Table:
    """The input table at ``path`` (a file or a folder of parts): one sentence on what is wrong.

    Args:
        path: the file or folder.
        what: what it is, for the message ("pairs shard").
        columns: read only these columns.
        schema: the columns it must have (those of ``columns`` when given, else all of the
            schema's): a file without one is "not a <what>", named.
        require: columns it must have, whether read or not (the whole table is read).
        kwargs: passed to :func:`parasim.io.read_table` (``filters``).

    Raises:
        UsageError: the path is missing, unreadable, or lacks a column.
    """
    import pyarrow as pa

    from parasim.io import column_names, read_table

    p = need(str(path), what)
    try:
        wanted = [*((columns or schema.names) if schema is not None else ()), *require]
        if wanted:
            have = set(column_names(p))
            missing = [c for c in dict.fromkeys(wanted) if c not in have]
            if missing:
                raise UsageError(f"{p}: not a {what} (no column {', '.join(missing)})")
        return read_table(p, columns=list(columns) if columns else None, **kwargs)
    except (pa.ArrowException, OSError) as exc:
        raise UsageError(f"{p}: cannot read the {what}: {exc}") from None
