"""The README fits on a screen, opens with the Quickstart's two commands and draws the current
workflow, every rule included; the documentation site builds with ``mkdocs build --strict``; every
command and every dotted ``parasim.x`` name the README and docs/ give exists."""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The pages a reader copies commands and names from.
DOC_FILES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
#: What CI runs (.ci/run), in this order; the README must show them as they are.
QUICKSTART = (
    "bash scripts/setup.sh && .venv/bin/snakemake --cores 8",
    "bash scripts/setup.sh --dev && .venv/bin/python -m pytest -q",
)


def _dag():
    """scripts/dag.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("parasim_dag", ROOT / "scripts" / "dag.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _between_markers(text: str, dag) -> str:
    i, j = text.index(dag.START) + len(dag.START), text.index(dag.END)
    return text[i:j].strip()


def _workflow_rules() -> set[str]:
    files = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    pattern = re.compile(r"^(?:rule|checkpoint) (\w+):", re.M)
    return {name for f in files for name in pattern.findall(f.read_text(encoding="utf-8"))}


def test_readme_fits_on_a_screen():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= 200, f"README.md has {n} lines; move detail to docs/ (at most 200)"


def test_readme_opens_with_the_two_quickstart_commands_verbatim():
    text = README.read_text(encoding="utf-8")
    first_block = re.search(r"^```\w*\n(.*?)^```", text, re.S | re.M).group(1)
    lines = [line.split("  #")[0].rstrip() for line in first_block.splitlines()]
    assert lines == list(QUICKSTART)


def test_readme_draws_every_rule_of_the_workflow():
    dag = _dag()
    block = _between_markers(README.read_text(encoding="utf-8"), dag)
    drawn = set()
    for line in block.splitlines()[2:-1]:  # inside ```mermaid / flowchart TB ... ```
        drawn.update(n.strip() for n in re.split(r"-->|&", line))
    assert drawn == _workflow_rules()


def test_readme_and_docs_graph_is_current():
    dag = _dag()
    want = dag.block(dag.rulegraph())
    for path in dag.TARGETS:
        got = _between_markers(path.read_text(encoding="utf-8"), dag)
        assert got == want, f"{path.relative_to(ROOT)} is out of date: run scripts/dag.py"


def test_readme_links_lead_to_files():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local and all((ROOT / t).exists() for t in local), local


def test_docs_site_builds_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "reference" / "clean" / "index.html").exists()


# --- the commands and names the docs give exist -------------------------------------------------

#: Code in Markdown: fenced blocks, and inline spans (which may wrap, but not across a paragraph).
_FENCED = re.compile(r"^```.*?^```", re.S | re.M)
_INLINE = re.compile(r"`((?:[^`\n]|\n(?!\n))+)`")
#: `parasim <command>` (also `.venv/bin/parasim` and `python -m parasim.cli <command>`).
_COMMAND = re.compile(r"(?<![\w.-])parasim(?:\.cli)? +([a-z][a-z0-9-]*)")
#: A dotted name in the package (not a host name such as gov.demo.parasim.example).
_NAME = re.compile(r"(?<![\w./-])parasim(?:\.[A-Za-z_]\w*)+")
#: ``from parasim.x import a, b`` in a code example: ``parasim.x.a`` and ``parasim.x.b``.
_FROM_IMPORT = re.compile(r"\bfrom (parasim(?:\.\w+)*) import (?:\(([^)]*)\)|([\w, ]+))")


def _code_spans(text: str):
    """``(offset, code)`` of every fenced block and inline code span of a Markdown text."""
    for m in _FENCED.finditer(text):
        yield m.start(), m.group(0)
    rest = _FENCED.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)  # offsets kept
    for m in _INLINE.finditer(rest):
        yield m.start(1), m.group(1)


def _where(path: Path, text: str, offset: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, offset) + 1}"


@functools.cache
def _commands() -> tuple[set[str], dict[str, str]]:
    """The CLI's commands by their own names, and each older name (alias) -> its command."""
    from parasim.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    # an alias shares its command's parser, whose prog ends with the command's own name
    primary = {name: parser.prog.split()[-1] for name, parser in sub.choices.items()}
    return set(primary.values()), {a: c for a, c in primary.items() if a != c}


def _find_spec_or_none(name: str):
    """The module spec of ``name``, or None (a parent that is no package or is missing)."""
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:  # a parent package is missing
        return None


def _resolves(name: str) -> bool:
    """Whether ``name`` is a module of parasim, or a module and attributes inside it."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        if _find_spec_or_none(module) is None:
            continue
        obj = importlib.import_module(module)
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_docs_name_only_commands_the_cli_has_by_their_own_names():
    """`parasim <command>` in README.md and docs/ is a command of the CLI, by its own name: the
    older names still work (aliases, parasim.stages) but the docs teach the current ones."""
    commands, aliases = _commands()
    bad = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        for offset, code in _code_spans(text):
            for m in _COMMAND.finditer(code):
                cmd = m.group(1)
                if cmd in aliases:
                    bad.append(
                        f"{_where(path, text, offset + m.start())}: `parasim {cmd}` is "
                        f"an older name of `parasim {aliases[cmd]}`"
                    )
                elif cmd not in commands:
                    bad.append(
                        f"{_where(path, text, offset + m.start())}: no command `parasim {cmd}`"
                    )
    assert not bad, "\n".join(bad)


def test_docs_name_only_modules_and_objects_that_exist():
    """Every dotted ``parasim.x.y`` in README.md and docs/, and every name a code example imports
    from parasim, exists (the module imports; the rest are its attributes)."""
    bad = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        names = [(m.start(), m.group(0)) for m in _NAME.finditer(text)]
        for m in _FROM_IMPORT.finditer(text):
            listed = (m.group(2) or m.group(3)).split(",")
            imported = [n.split(" as ")[0].strip() for n in listed if n.strip()]
            names += [(m.start(), f"{m.group(1)}.{n}") for n in imported]
        for offset, name in names:
            if not _resolves(name):
                bad.append(f"{_where(path, text, offset)}: {name} does not exist")
    assert not bad, "\n".join(bad)


def test_docs_name_only_rules_the_workflow_has():
    """The rules each stage and model page names after **Rule(s)**, and every `<x>_done`
    rule the docs name, are rules of the workflow (the `.done` rules are named after their
    stages: `pair_done`, not `pairs_done`)."""
    rules = _workflow_rules()
    bad = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        named = [(m.start(), m.group(1)) for m in re.finditer(r"`(\w+_done)`", text)]
        head = re.search(r"^\*\*Rules?\*\*(.*?)(?=\*\*|\n\n)", text, re.S | re.M)
        if head:
            named += [(head.start(), n) for n in re.findall(r"`(\w+)`", head.group(1))]
        bad += [f"{_where(path, text, i)}: no rule {n}" for i, n in named if n not in rules]
    assert not bad, "\n".join(dict.fromkeys(bad))
