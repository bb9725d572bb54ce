"""Helpers shared by every stage command (`parasim <stage> ...`), below every stage.

Each stage's ``commands.py`` reads its inputs, calls one function of the stage, then writes its
output and a JSON file of counts with these helpers. ``parasim.cli`` only builds the parser and
dispatches; no stage imports it.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.config import (
    SiteConfig,
    load_config,
    site_by_name,
    validate_config,
    validate_section,
)
from parasim.stats import Stats

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
