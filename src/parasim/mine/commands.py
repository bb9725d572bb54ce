"""`parasim mine-divergences` (rule ``mine_divergences``): the mine stage as a command."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable

from parasim.stagecli import section_from_args, stage_job

log = logging.getLogger("parasim.mine")


def cmd_mine(args: argparse.Namespace) -> None:
    """Mine the natural divergences of one site's positives."""
    from parasim.config import validate_section
    from parasim.io import write_table
    from parasim.mine.stage import MineSettings, mine_divergences
    from parasim.negatives.inputs import read_positives

    settings = MineSettings.from_config(section_from_args(args, "mine"))
    static = validate_section("align", json.loads(args.align_json or "{}"))["static"]
    positives = read_positives(args.positives)
    with stage_job("mine", args.stats, site=args.site) as rec:
        table = mine_divergences(positives, settings, rec, static=static)
        write_table(table, args.out)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add(
        "mine-divergences",
        cmd_mine,
        "Natural divergences of a site: its lines nearest a positive that are not its translation.",
    )
    site_opts(sp)
    sp.add_argument("--positives", nargs="+", required=True, help="the site's positives shards")
    sp.add_argument("--out", required=True, help="mined divergences file to write")
    sp.add_argument(
        "--align-json", help="the `align` section as JSON (its `static` encoder settings)"
    )
