"""The import rules of parasim.train, and two package-wide ones that keep it apart.

* A model family (``parasim.train.<family>``, a package with a ``commands.py``) imports
  ``parasim.train.core``, ``parasim.train.eval`` and the rest of ``parasim``, never another
  family; ``core`` and ``eval`` import no family, and ``core`` no evaluation. ``table`` (the
  models table of every family's metrics, issue 34) counts as a family: it reads the families'
  ``metrics.json`` files, never their code.
* Nothing outside ``parasim.bench`` imports it (the CLI's ``parasim bench`` dispatch aside).
* One function in the package is called ``load_encoder`` (``parasim.models.load_encoder``).

Imports anywhere in a module count, inside functions too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from importgraph import SRC, imports_of, module_name, within  # noqa: E402

TRAIN = SRC / "parasim" / "train"
FAMILIES = sorted(p.name for p in TRAIN.iterdir() if (p / "commands.py").is_file())


def modules(package: Path) -> dict[str, set[str]]:
    """``{module: its imports}`` for every module under ``package``."""
    return {module_name(p): imports_of(p) for p in sorted(package.rglob("*.py"))}


def test_the_families_are_the_packages_with_commands():
    assert FAMILIES == [
        "align_encoder", "entity_siamese", "graded", "ranker", "s3bert", "similarity", "table",
    ]  # fmt: skip
    # a lazy import inside a function counts (the families import most of their code so)
    deps = modules(TRAIN / "ranker")["parasim.train.ranker.commands"]
    assert "parasim.train.ranker.training" in deps


def test_no_family_imports_another():
    offenders = []
    for fam in FAMILIES:
        for mod, deps in modules(TRAIN / fam).items():
            others = [f for f in FAMILIES if f != fam]
            bad = sorted(d for d in deps for f in others if within(d, f"parasim.train.{f}"))
            if bad:
                offenders.append(f"{mod} imports {bad}")
    assert not offenders, "families import each other: " + "; ".join(offenders)


def test_core_and_eval_import_no_family():
    offenders = []
    for part, banned in (("core", [*FAMILIES, "eval"]), ("eval", FAMILIES)):
        for mod, deps in modules(TRAIN / part).items():
            bad = sorted(d for d in deps for b in banned if within(d, f"parasim.train.{b}"))
            if bad:
                offenders.append(f"{mod} imports {bad}")
    assert not offenders, "; ".join(offenders)


def test_nothing_outside_bench_imports_bench():
    # parasim.cli runs `parasim bench <name>`: the one way in, by design
    allowed = {"parasim.cli"}
    offenders = sorted(
        mod
        for mod, deps in modules(SRC / "parasim").items()
        if not within(mod, "parasim.bench")
        and mod not in allowed
        and any(within(d, "parasim.bench") for d in deps)
    )
    assert not offenders, f"these modules import parasim.bench: {offenders}"


def test_one_function_is_called_load_encoder():
    found = [
        f"{module_name(p)}:{node.lineno}"
        for p in sorted((SRC / "parasim").rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "load_encoder"
    ]
    assert len(found) == 1 and found[0].startswith("parasim.models.encoder:"), found
