"""`parasim make-divergences` (rule ``make_divergences``) and `parasim divergences-card`: the
divergences stage as commands."""

from __future__ import annotations

import argparse
import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from parasim.stats import Stats

log = logging.getLogger("parasim.divergences")

#: Stats that describe the run rather than count anything: taken from the first shard that has
#: them, never added up.
_SETTINGS = ("lm", "spacy", "config")


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _add(out[k], v) if k in out else copy.deepcopy(v)
        return out
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return a + b
    return a


def merge_stats(items: Sequence[dict]) -> dict:
    """Add up per-shard ``make_divergences`` stats into the stats of the whole site.

    Counts are summed; the ratios (``checks.<type>.valid_share``,
    ``alignment.links_per_en_token``, ``variants_per_second``) are recomputed from the sums;
    settings (``lm``, ``spacy``, ``config``) come from the first shard that has them (an empty
    shard loads no model); ``alignment.extra_pairs`` (the same extra corpus for every shard) is
    taken as the largest per language, not summed.
    """
    out: dict[str, Any] = {}
    for s in items:
        counts = {
            k: v
            for k, v in s.items()
            if k not in _SETTINGS and k != "variants_per_second" and k != "alignment"
        }
        out = _add(out, counts) if out else copy.deepcopy(counts)
        for k in _SETTINGS:
            if not out.get(k) and s.get(k):
                out[k] = copy.deepcopy(s[k])
        al = s.get("alignment", {})
        acc = out.setdefault("alignment", {"links": 0, "en_tokens": 0, "extra_pairs": {}})
        acc["links"] += al.get("links", 0)
        acc["en_tokens"] += al.get("en_tokens", 0)
        acc["pairs_without_links"] = acc.get("pairs_without_links", 0) + al.get(
            "pairs_without_links", 0
        )
        for lang, n in al.get("extra_pairs", {}).items():
            acc["extra_pairs"][lang] = max(n, acc["extra_pairs"].get(lang, 0))
        if "aligner" in al:
            acc.setdefault("aligner", al["aligner"])
        if "reproducible" in al:  # reproducible only when every shard is
            acc["reproducible"] = acc.get("reproducible", True) and al["reproducible"]
    for k in _SETTINGS:
        out.setdefault(k, None)
    for d in out.get("checks", {}).values():
        d["valid_share"] = round(d["valid"] / d["rows"], 4) if d.get("rows") else None
    al = out.setdefault("alignment", {"links": 0, "en_tokens": 0, "extra_pairs": {}})
    al["links_per_en_token"] = round(al["links"] / max(1, al["en_tokens"]), 4)
    seconds = out.get("seconds", {})
    types = (out.get("config") or {}).get("types", [])
    out["variants_per_second"] = {
        t: round(out.get("rows_by_type", {}).get(t, 0) / seconds[t], 2) if seconds.get(t) else None
        for t in types
    }
    if "seconds" in out:
        out["seconds"] = {k: round(v, 3) for k, v in out["seconds"].items()}
    return out


def cmd_divergences(args: argparse.Namespace) -> None:
    """Perturb one positives shard into one divergences shard (eflomal aligns it at once)."""
    from parasim.divergences import DivergencesSettings, make_divergences
    from parasim.io import read_table, write_table
    from parasim.stagecli import UsageError, need, section_from_args, write_stats

    settings = DivergencesSettings.from_config(section_from_args(args, "divergences"))
    positives = read_table(need(args.input, "positives shard"))
    try:
        table, stats = make_divergences(positives, settings, log=log)
    except ValueError as exc:  # missing columns or a bad config: name the file
        raise UsageError(f"{args.input}: {exc}") from None
    write_table(table, args.output)
    write_stats(args.stats, divergences_stats(stats))


#: Figures of a shard that count nothing: its settings, rates and the LM's batching misses.
_FIGURES = ("spacy", "lm", "lm_prescore_misses", "variants_per_second", "config")
#: The alignment's counts (the rest of ``alignment`` describes the run).
_ALIGNMENT_COUNTS = ("links", "en_tokens", "pairs_without_links")


def divergences_stats(raw: Mapping[str, Any]) -> Stats:
    """:func:`~parasim.divergences.make_divergences`' counts as the stage's stats.

    Rows in: positives; out: divergence rows (a ranking group of several rows per seed kept);
    dropped: the positives that gave no group, by reason (``seed_skipped``).
    :func:`shard_counts` turns them back into the stage's own form.
    """
    c = copy.deepcopy(dict(raw))
    alignment, checks = c.pop("alignment"), c.pop("checks")
    figures = {k: c.pop(k) for k in _FIGURES}
    figures["alignment"] = {k: v for k, v in alignment.items() if k not in _ALIGNMENT_COUNTS}
    figures["checks"] = {t: {"valid_share": d["valid_share"]} for t, d in checks.items()}
    return Stats(
        "divergences",
        rows_in=c.pop("n_positives"),
        rows_out=c.pop("n_rows"),
        dropped=c.pop("seed_skipped"),
        seconds=c.pop("seconds"),
        figures=figures,
        counts={
            **c,  # n_seeds, n_groups, rows by type and side, variants missing, spares used
            "alignment": {k: alignment[k] for k in _ALIGNMENT_COUNTS},
            "checks": {
                t: {k: v for k, v in d.items() if k != "valid_share"} for t, d in checks.items()
            },
        },
    )


def _union(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _union(out[k], v) if isinstance(v, Mapping) and k in out else v
    return out


def shard_counts(stats: Stats) -> dict[str, Any]:
    """A shard's stats in :func:`~parasim.divergences.make_divergences`' own form (the card's)."""
    base = {
        "n_positives": stats.rows_in,
        "n_rows": stats.rows_out,
        "seed_skipped": dict(stats.dropped),
        "seconds": dict(stats.seconds),
    }
    return base | _union(stats.counts, stats.figures)


def cmd_divergences_card(args: argparse.Namespace) -> None:
    """Add up the shards' stats; write the dataset card (and the stage's ``.done`` summary).

    With ``--done``, zero rows (without ``--allow-empty``) is an error of one sentence that
    names the earliest empty stage of the site (:mod:`parasim.diagnose`).
    """
    import pyarrow.parquet as pq

    from parasim.diagnose import require_rows
    from parasim.divergences import write_card
    from parasim.stagecli import UsageError, need, read_stats, write_stats
    from parasim.stats import done_summary

    if len(args.shards) != len(args.stats):
        raise UsageError(
            f"--shards names {len(args.shards)} files but --stats names {len(args.stats)}"
        )
    per_shard = read_stats(args.stats)
    for shard, path, s in zip(args.shards, args.stats, per_shard, strict=True):
        rows = pq.ParquetFile(need(shard, "divergences shard")).metadata.num_rows
        if s.rows_out != rows:
            raise UsageError(
                f"{path}: says {s.rows_out} rows but {shard} has {rows} (stale stats?)"
            )
    stats = {
        "site": args.site,
        "shards": len(args.shards),
        **merge_stats([shard_counts(s) for s in per_shard]),
    }
    write_card(stats, args.out)
    log.info("card: %s (%d rows by type %s)", args.out, stats["n_rows"], stats["rows_by_type"])
    if args.done:
        upstream = read_stats(args.upstream)
        n_rows = stats["n_rows"]
        site = args.site or "?"
        require_rows(site, "divergences", n_rows, per_shard, upstream, args.allow_empty)
        write_stats(
            args.done, done_summary("divergences", args.site, len(args.shards), n_rows, per_shard)
        )


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add(
        "make-divergences",
        cmd_divergences,
        "Synthetic divergences (ranking groups, EQ/DIV tags) of one positives shard.",
    )
    site_opts(sp)
    sp.add_argument("--input", required=True, help="positives shard")
    sp.add_argument("--output", required=True, help="divergences shard to write")

    sp = add(
        "divergences-card",
        cmd_divergences_card,
        "Dataset card (and .done summary) of a site's divergences, summed over shards.",
    )
    sp.add_argument("--shards", nargs="+", required=True, help="divergences shards")
    sp.add_argument("--stats", nargs="+", required=True, help="their stats files, in order")
    sp.add_argument("--out", required=True, help="README.md to write")
    sp.add_argument("--site", help="site name (written into the card and summary)")
    sp.add_argument("--done", help="also write the stage summary (.done) here")
    sp.add_argument(
        "--upstream",
        nargs="*",
        default=[],
        help="stats files of the site's earlier stages: they explain a stage with 0 rows",
    )
    sp.add_argument(
        "--allow-empty", action="store_true", help="with --done: zero rows is not an error"
    )
