"""The README fits on a screen, opens with the Quickstart's two commands and draws the current
workflow, every rule included; the documentation site builds with ``mkdocs build --strict``."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
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
