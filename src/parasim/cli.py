"""`parasim <stage> ...`: every workflow stage as a command, with or without Snakemake.

Each stage command reads its inputs, calls one function in the stage's module, writes its output
atomically and a JSON file of counts (``--stats``), and logs progress to stderr. Errors a user can
fix (bad config, missing input) end with one line naming the culprit and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence

from parasim.config import ConfigError, load_config
from parasim.stagecli import UsageError

log = logging.getLogger("parasim")

#: Modules whose ``register(add, site_opts)`` adds a stage's commands to the parser.
STAGE_COMMANDS = [
    "parasim.crawl.commands",
    "parasim.pair.commands",
    "parasim.parse.commands",
    "parasim.translate.commands",
    "parasim.align.commands",
    "parasim.clean.commands",
    "parasim.negatives.commands",
    "parasim.corpus.commands",
    "parasim.divergences.commands",
    "parasim.scores.commands",
    "parasim.train.ranker.commands",
    "parasim.train.s3bert.commands",
    "parasim.train.similarity.commands",
    "parasim.train.entity_siamese.commands",
    "parasim.train.align_encoder.commands",
    "parasim.report.commands",
    "parasim.probe.commands",
]


# ---------------------------------------------------------------- helpers


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


# ---------------------------------------------------------------- commands


def cmd_bench(args: argparse.Namespace) -> None:
    from parasim.bench import run

    rc = run(args.name, args.rest)
    if rc:
        raise SystemExit(rc)


def cmd_validate(args: argparse.Namespace) -> None:
    from parasim.preflight import check_installed

    cfg = load_config(args.config)
    try:
        check_installed(cfg)
    except ConfigError as exc:
        raise ConfigError(f"{args.config}: {exc}") from None
    print(
        f"{args.config}: valid ({len(cfg['sites'])} site(s): "
        f"{', '.join(s['name'] for s in cfg['sites'])})"
    )


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The `parasim` argument parser."""
    p = argparse.ArgumentParser(prog="parasim", description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, fn: Callable, help_: str, **kw) -> argparse.ArgumentParser:
        kw.setdefault("description", help_)
        sp = sub.add_parser(name, help=help_, **kw)
        sp.set_defaults(func=fn)
        return sp

    def site_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--site-json", help="the site's config entry as JSON (Snakemake passes it)")
        sp.add_argument("--config", help="a config.yaml (with --site)")
        sp.add_argument("--site", help="site name in --config")
        sp.add_argument("--settings-json", help="the stage's config section as JSON")
        sp.add_argument("--stats", help="write counts as JSON here")

    # Every stage registers its own commands: parasim/<stage>/commands.py, register().
    for module in STAGE_COMMANDS:
        importlib.import_module(module).register(add, site_opts)

    from parasim.bench import available, listing

    sp = add(
        "bench",
        cmd_bench,
        "Benchmarks, one per stage: `parasim bench <name> --help`.",
        description=f"Benchmarks (src/parasim/bench/<name>.py):\n{listing()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sp.add_argument("name", choices=sorted(available()), metavar="name", help="the benchmark")
    sp.add_argument("rest", nargs=argparse.REMAINDER, help="its arguments (see its --help)")

    sp = add(
        "validate-config",
        cmd_validate,
        "Validate a config file: the schema, and that this machine can translate and parse "
        "every site's languages.",
    )
    sp.add_argument("config")

    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `parasim` console script."""
    # Idle OpenMP threads (torch) sleep instead of spinning: when several model jobs share fewer
    # cores than Snakemake was told (`--cores 8` on a 2-core machine), spinning threads starve the
    # others (4 divergence jobs on 2 cores: > 420 s spinning, 198 s passive). Set before torch
    # loads; a value in the environment wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    try:
        args.func(args)
    except (ConfigError, UsageError, FileNotFoundError) as exc:
        print(f"parasim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
