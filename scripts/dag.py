"""Draw the workflow's rule graph as a mermaid block in README.md and docs/stages/index.md.

    .venv/bin/python scripts/dag.py           # rewrite the blocks between the dag markers
    .venv/bin/python scripts/dag.py --check   # exit 1 when a block is out of date

The graph is Snakemake's own (`snakemake --rulegraph mermaid-js` on the shipped config.yaml),
with every rule of the workflow: besides `rule all`'s targets it asks for the three evaluations
that `rule all` leaves out (REFreSD, Flores CWR, MSRP: they read data from outside the project;
REFreSD and Flores point at empty placeholder folders here, so that the graph does not depend on
../shared). The installed-models check is switched off (`check_installed: false`): the graph does
not depend on the machine either. Edges that a longer path already implies are left out (the
`.done` targets read the stats of every stage before them), and the rules are listed in
dependency order, ties by name, so that the block does not change with Python's hash seed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
#: Files holding the block, between START and END.
TARGETS = [ROOT / "README.md", ROOT / "docs" / "stages" / "index.md"]
START = "<!-- dag:start (scripts/dag.py writes this block) -->"
END = "<!-- dag:end -->"
#: Outputs of the rules `rule all` does not ask for (eval_similarity_msrp's: see `extra_targets`).
EXTRA_TARGETS = [
    "results/eval/divergence-ranker/refresd.json",
    "results/eval/aligned-encoder/cwr.json",
    "results/models/static-encoder/build.json",  # align.encoder e5-static / auto only
]


def extra_targets(root: Path = ROOT) -> list[str]:
    """EXTRA_TARGETS and one model's MSRP evaluation (its wildcards from the shipped config)."""
    from parasim.config import validate_config  # the workflow's own defaults

    raw = yaml.safe_load((root / "config.yaml").read_text(encoding="utf-8"))
    for site in raw["sites"]:
        site.pop("serve_dir", None)  # checked against the working directory; not needed here
    cfg = validate_config(raw)
    sim = cfg["train"]["similarity"]
    partition = (sim["partitions"] or list(cfg["corpus"]["partitions"]))[0]
    msrp = f"results/eval/similarity-{sim['encoders'][0]}-{partition}/msrp.json"
    return [*EXTRA_TARGETS, msrp]


def rulegraph(root: Path = ROOT) -> str:
    """Snakemake's mermaid rule graph of the workflow in `root`, every rule included."""
    with tempfile.TemporaryDirectory(prefix="parasim-dag-") as tmp:
        data = Path(tmp)
        for folder in ("refresd", "flores"):
            (data / folder).mkdir()
        overlay = data / "dag.yaml"
        overlay.write_text(
            "check_installed: false\n"
            f"train: {{refresd: '{data / 'refresd'}', flores: '{data / 'flores'}'}}\n",
            encoding="utf-8",
        )
        cmd = [sys.executable, "-m", "snakemake", "--rulegraph", "mermaid-js", "--forceall"]
        cmd += ["--configfile", "config.yaml", str(overlay), "--", "all", *extra_targets(root)]
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return done.stdout


def parse(mermaid: str) -> tuple[list[str], set[tuple[str, str]]]:
    """The rules and the edges (from, to) of Snakemake's mermaid output."""
    names = dict(re.findall(r"^\s*(id\d+)\[(\w+)\]\s*$", mermaid, re.M))
    edges = {
        (names[a], names[b]) for a, b in re.findall(r"^\s*(id\d+) --> (id\d+)\s*$", mermaid, re.M)
    }
    return sorted(names.values()), edges


def reduce(nodes: list[str], edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The transitive reduction: drop a -> c where another path leads from a to c."""
    succ = {n: {b for a, b in edges if a == n} for n in nodes}

    def reachable(start: str, skip: str) -> set[str]:
        seen, todo = set(), [s for s in succ[start] if s != skip]
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo += succ[n]
        return seen

    return {(a, c) for a, c in edges if c not in reachable(a, skip=c)}


def topological(nodes: list[str], edges: set[tuple[str, str]]) -> list[str]:
    """Nodes in dependency order, ties by name (Kahn's algorithm)."""
    indeg = {n: sum(1 for _, b in edges if b == n) for n in nodes}
    ready, order = sorted(n for n in nodes if indeg[n] == 0), []
    while ready:
        n = ready.pop(0)
        order.append(n)
        for a, b in sorted(edges):
            if a == n:
                indeg[b] -= 1
                if indeg[b] == 0:
                    ready = sorted([*ready, b])
    if len(order) != len(nodes):
        raise RuntimeError("the rule graph has a cycle")
    return order


def block(mermaid: str) -> str:
    """The fenced mermaid block: one line per rule with inputs, its inputs joined by `&`."""
    nodes, edges = parse(mermaid)
    edges = reduce(nodes, edges)
    order = topological(nodes, edges)
    rank = {n: i for i, n in enumerate(order)}
    lines = ["```mermaid", "flowchart TB"]
    for n in order:
        inputs = sorted((a for a, b in edges if b == n), key=rank.__getitem__)
        if inputs:
            lines.append(f"    {' & '.join(inputs)} --> {n}")
        elif not any(a == n for a, _ in edges):
            lines.append(f"    {n}")  # a rule with no edge at all still appears
    lines.append("```")
    return "\n".join(lines)


def splice(text: str, new_block: str, path: Path) -> str:
    """`text` with the part between the markers replaced by `new_block`."""
    i, j = text.find(START), text.find(END)
    if i < 0 or j < i:
        raise RuntimeError(f"{path}: no {START} ... {END} markers")
    return text[: i + len(START)] + "\n" + new_block + "\n" + text[j:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a block is out of date")
    args = ap.parse_args(argv)
    new_block = block(rulegraph())
    stale = []
    for path in TARGETS:
        text = path.read_text(encoding="utf-8")
        new = splice(text, new_block, path)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"out of date: {', '.join(map(str, stale))} (run scripts/dag.py)", file=sys.stderr)
        return 1
    for p in stale:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
