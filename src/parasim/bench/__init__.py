"""Benchmarks, one module per stage: `parasim bench <name> [...]` runs ``parasim.bench.<name>``.

Each module here has a ``main(argv=None)`` (argparse) and runs as ``python -m
parasim.bench.<name>`` too. A new benchmark is a new module with a ``main``: it is found by
:func:`available`, nothing to register. Figures are printed, recorded in BENCHMARKS.md and never
asserted in tests.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["available", "main", "run"]


def available() -> dict[str, str]:
    """Benchmark name -> the first line of its docstring, read without importing the module."""
    out = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.ispkg or info.name.startswith("_"):
            continue
        source = Path(info.module_finder.path) / f"{info.name}.py"
        if not source.is_file():
            continue
        tree = ast.parse(source.read_text(encoding="utf-8"))
        if not any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            continue
        doc = ast.get_docstring(tree) or ""
        out[info.name] = doc.strip().splitlines()[0] if doc.strip() else ""
    return out


def listing() -> str:
    """The benchmarks, one per line, for `--help`."""
    names = available()
    width = max(map(len, names), default=0)
    return "\n".join(f"  {name:<{width}}  {line}" for name, line in names.items())


def run(name: str, argv: Sequence[str] = ()) -> int:
    """Run benchmark ``name`` with ``argv``; its exit status (0 when ``main`` returns None)."""
    if name not in available():
        raise SystemExit(f"parasim bench: unknown benchmark {name!r}; one of:\n{listing()}")
    rc = importlib.import_module(f"{__name__}.{name}").main(list(argv))
    return int(rc or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m parasim.bench <name> [...]` (the same as `parasim bench <name> [...]`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: parasim bench <name> [...]\n\nbenchmarks:\n{listing()}")
        return 0
    return run(argv[0], argv[1:])
