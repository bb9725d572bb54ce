"""Every stage of the workflow, gathered from the stages' own modules.

Each stage's module ends with its record: ``src/parasim/<stage>/stage.py`` (a model family's
``src/parasim/train/<family>/stage.py``) exports ``SPEC``, a :class:`~parasim.spec.Stage` (or
``SPECS``, several: the negatives module holds topics and negatives; ``()`` for a module that is
not a stage of the workflow). This module finds those files, reads their records and orders them
by flow (:data:`STAGES`); nothing else lists the stages. It is read by the workflow
(``workflow/rules/common.smk``: the `.done` targets of ``rule all``, the stats a `.done` target and
the yield report read), the CLI (each stage's commands), the yield report (:mod:`parasim.report`),
:mod:`parasim.diagnose` and the tests. A stage's ``name`` is the one key used everywhere: the
``stage`` field of its stats files, the yield report's ``stage`` column, ``parasim summarize
--stage`` and its `.done` rule (``<name>_done``).

Adding a stage: its package with a ``stage.py`` ending in its ``SPEC`` and a ``commands.py`` whose
``register(add, site_opts)`` adds its commands, and its rule file (``docs/contributing.md``,
"Adding a stage"). The `.done` targets of ``rule all``, the stats they and the yield report read,
the CLI and diagnose follow from the record; ``tests/test_stages.py`` checks it against the
workflow and the CLI.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from parasim.spec import Per, Stage

# STAGES and FUNNEL come from __getattr__ (gathered on first use)
__all__ = [  # noqa: F822
    "FUNNEL",
    "STAGES",
    "Per",
    "Stage",
    "by_command",
    "get",
    "stage_modules",
    "upstream_chain",
]

_ROOT = Path(__file__).resolve().parent


def stage_modules() -> list[str]:
    """The modules that hold stage records: every ``stage.py`` of a package of parasim, and of a
    model family under ``parasim.train``, in the order of their paths."""
    files = sorted(_ROOT.glob("*/stage.py")) + sorted(_ROOT.glob("train/*/stage.py"))
    return ["parasim." + ".".join(f.relative_to(_ROOT).with_suffix("").parts) for f in files]


def _records(module: str) -> tuple[Stage, ...]:
    """The stage records ``module`` exports (``SPEC`` or ``SPECS``).

    Raises:
        TypeError: the module exports neither, or something other than stages.
    """
    mod = importlib.import_module(module)
    if hasattr(mod, "SPEC"):
        found: Any = (mod.SPEC,)
    elif hasattr(mod, "SPECS"):
        found = tuple(mod.SPECS)
    else:
        raise TypeError(
            f"{module} exports no SPEC (its stage's record) nor SPECS (several, or () for a module "
            "that is not a stage of the workflow)"
        )
    bad = [s for s in found if not isinstance(s, Stage)]
    if bad:
        raise TypeError(f"{module}: SPEC/SPECS must be parasim.spec.Stage records, not {bad!r}")
    package = module.removesuffix(".stage")
    wrong = [s.name for s in found if s.module not in (None, package)]
    if wrong:
        raise TypeError(f"{module}: stages {wrong} name another package than {package}")
    return tuple(replace(s, module=package) for s in found)


def _flow_order(found: list[Stage]) -> tuple[Stage, ...]:
    """The stages in flow order: by how many stages lie before each (its ``upstream`` chain),
    then by name; a stage that reads many (no upstream, no stats per site: the reports) last.

    Raises:
        ValueError: two stages of one name, or an ``upstream`` / ``done_covers`` naming no stage,
            or a cycle of upstreams.
    """
    by_name: dict[str, Stage] = {}
    for s in found:
        if s.name in by_name:
            raise ValueError(
                f"two stages are named {s.name!r} ({by_name[s.name].module}, {s.module})"
            )
        by_name[s.name] = s
    for s in found:
        for ref in (s.upstream, *s.done_covers):
            if ref is not None and ref not in by_name:
                raise ValueError(f"stage {s.name}: no stage {ref!r} (known: {', '.join(by_name)})")

    def depth(s: Stage) -> int:
        n, seen = 0, {s.name}
        while s.upstream is not None:
            s = by_name[s.upstream]
            if s.name in seen:
                raise ValueError(f"stages {sorted(seen)}: their upstreams make a cycle")
            seen.add(s.name)
            n += 1
        return n

    def key(s: Stage) -> tuple[int, int, str]:
        reads_many = s.upstream is None and s.per is None
        return (int(reads_many), depth(s), s.name)

    return tuple(sorted(found, key=key))


@cache
def _gather() -> tuple[Stage, ...]:
    found: list[Stage] = []
    for module in stage_modules():
        found += _records(module)
    return _flow_order(found)


@cache
def _by_name() -> dict[str, Stage]:
    return {s.name: s for s in _gather()}


def __getattr__(name: str) -> Any:
    """:data:`STAGES` and :data:`FUNNEL`, gathered on first use (a stage's module imports
    :mod:`parasim.spec`, never this module at import time)."""
    if name == "STAGES":
        return _gather()
    if name == "FUNNEL":
        #: The per-site stages in the order rows flow through them: the yield report's funnel,
        #: and the order in which diagnose looks for the earliest empty stage of a site.
        return tuple(s for s in _gather() if s.per in ("site", "shard"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> Stage:
    """The stage called ``name``.

    Raises:
        KeyError: naming the known stages.
    """
    try:
        return _by_name()[name]
    except KeyError:
        names = ", ".join(_by_name())
        raise KeyError(f"no stage {name!r}; the stages: {names}") from None


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
    for stage in _gather():
        for cmd in stage.commands:
            aliases = tuple(stage.aliases.get(cmd, ()))
            if command == cmd or command in aliases:
                return cmd, aliases
    return None
