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


def write_stats(path: str | None, stats: dict[str, Any]) -> None:
    """Log a job's counts and write them atomically as JSON to ``path`` (when given)."""
    text = json.dumps(stats, indent=2, sort_keys=True, default=str)
    log.info("stats: %s", json.dumps(stats, sort_keys=True, default=str))
    if path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(text + "\n", encoding="utf-8")
        tmp.replace(p)


def need(path: str, what: str) -> Path:
    """``path`` as a Path, or a UsageError naming ``what`` is missing."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{what} not found: {p}")
    return p


def _additive(key: str, value: Any) -> bool:
    """Counts (integers) and timings add up over shards; rates, shares, ratios and flags do not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if key.endswith(("_per_s", "_rate", "_share", "share", "_ratio", "_mean", "_median")):
        return False
    return isinstance(value, int) or key == "seconds" or key.endswith(("_seconds", "_s"))


def sum_counts(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Add up the additive fields of several stats dicts (nested dicts too); drop the rest.

    Integers (counts) and timings are summed; floats that are not timings (rates, shares, ratios,
    scores) cannot be summed over shards and are left out, as are flags and text.
    """
    out: dict[str, Any] = {}
    for d in items:
        for k, v in d.items():
            if _additive(k, v):
                out[k] = out.get(k, 0) + v
            elif isinstance(v, Mapping):
                out[k] = sum_counts([out.get(k, {}), v])
    return out
