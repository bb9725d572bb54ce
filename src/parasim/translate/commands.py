"""`parasim translate-lines` (rule ``translate_lines``): the translate stage as a command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from parasim.stagecli import need, section_from_args, stage_job

log = logging.getLogger("parasim.translate")


def cmd_translate(args: argparse.Namespace) -> None:
    """Translate the other-language lines of one shard to English (cached).

    Rows (page pairs) pass through, none is dropped: a line without a translation keeps its row
    (counted in ``untranslated_by_reason``).
    """
    from parasim.translate.base import TranslateSettings
    from parasim.translate.stage import translate_file

    settings = TranslateSettings.from_config(section_from_args(args, "translate"))
    cache = args.cache or settings.cache
    source = need(args.input, "lines shard")  # the stage reads it
    with stage_job("translate", args.stats) as rec:  # no site: its stats never named one
        translate_file(source, args.output, settings, cache, log=log, threads=args.threads, rec=rec)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("translate-lines", cmd_translate, "Translate one lines shard to English (cached).")
    site_opts(sp)
    sp.add_argument("--input", required=True, help="lines shard")
    sp.add_argument("--output", required=True, help="translated shard to write")
    sp.add_argument("--cache", help="SQLite translation cache (default: translate.cache)")
    sp.add_argument("--threads", type=int, default=1)
