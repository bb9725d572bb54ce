"""`parasim <stage> ...`: every workflow stage as a command, with or without Snakemake.

A stage's commands are named after its rules (``make_divergences`` -> ``parasim
make-divergences``) and still answer to their older names (``parasim divergences``); the stages
and their commands are listed in :mod:`parasim.stages`.

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
import time
from collections.abc import Callable, Sequence

from parasim import stages
from parasim.config import ConfigError, load_config
from parasim.stagecli import UsageError

log = logging.getLogger("parasim")

#: Modules of commands that are not a stage's (:mod:`parasim.stages` lists the stages').
OTHER_COMMANDS = ["parasim.probe.commands"]


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
    sub = p.add_subparsers(dest="command", required=True, metavar="<command>")

    def add(name: str, fn: Callable, help_: str, **kw) -> argparse.ArgumentParser:
        # A stage's command is named after its rule and answers to its older names too; a module
        # may still register it under an older name (the training commands do).
        name, aliases = stages.by_command(name) or (name, ())
        kw.setdefault("description", help_)
        sp = sub.add_parser(name, help=help_, aliases=list(aliases), **kw)
        sp.set_defaults(func=fn)
        return sp

    def site_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--site-json", help="the site's config entry as JSON (Snakemake passes it)")
        sp.add_argument("--config", help="a config.yaml (with --site)")
        sp.add_argument("--site", help="site name in --config")
        sp.add_argument("--settings-json", help="the stage's config section as JSON")
        sp.add_argument("--stats", help="write counts as JSON here")

    # Every stage registers its own commands (parasim/<stage>/commands.py, register()), in the
    # order of the stages; stages sharing a module register it once.
    modules = dict.fromkeys([s.commands_from for s in stages.STAGES] + OTHER_COMMANDS)
    for module in modules:
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
    t0 = time.perf_counter()
    try:
        args.func(args)
    except (ConfigError, UsageError, FileNotFoundError) as exc:
        print(f"parasim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        _account(args.command, t0)
    return 0


def _account(command: str, t0: float) -> None:
    """With ``PARASIM_ACCOUNTING=DIR``: this job's wall, CPU and peak RSS as
    ``DIR/<pid>-<ns>.json`` (the pid alone is reused within a long run: apertium's processes
    wrap the pids, and a later job's record replaced an earlier one's at ×4, issue 32).

    CPU is the process's own and that of every child it waited for (apertium, eflomal, worker
    pools), exactly, where a sampler such as Snakemake's ``benchmark:`` misses what a job spends
    after its last sample (every 30 s once it has run 15 s). Read by ``parasim bench scale run``.
    """
    folder = os.environ.get("PARASIM_ACCOUNTING")
    if not folder:
        return
    import json
    import resource

    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    record = {
        "command": command,
        "argv": sys.argv[1:],
        "wall_s": round(time.perf_counter() - t0, 3),
        "cpu_s": round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 3),
        "max_rss_mb": round(max(me.ru_maxrss, kids.ru_maxrss) / 1024, 1),
    }
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{os.getpid()}-{time.time_ns()}.json"), "x") as fh:
        json.dump(record, fh)


if __name__ == "__main__":
    sys.exit(main())
