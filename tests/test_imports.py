"""The import graph of `src/parasim`: arrows point down, never back to the CLI or the last stage."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from importgraph import graph, within  # noqa: E402


def test_the_graph_sees_imports_inside_functions():
    g = graph()
    # parasim.cli imports the stage commands by name (importlib), and stagecli at the top
    assert "parasim.stagecli" in g["parasim.cli"]
    # a lazy import inside a function body counts too
    assert any(within(m, "parasim.stagecli") for m in g["parasim.align.commands"])


def test_no_module_imports_the_cli():
    offenders = {m for m, deps in graph().items() if m != "parasim.cli" and "parasim.cli" in deps}
    assert not offenders, f"these modules import parasim.cli: {sorted(offenders)}"


def test_negatives_does_not_import_corpus():
    offenders = {
        m
        for m, deps in graph().items()
        if within(m, "parasim.negatives") and any(within(d, "parasim.corpus") for d in deps)
    }
    assert not offenders, f"these negatives modules import parasim.corpus: {sorted(offenders)}"
