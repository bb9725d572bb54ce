"""Adding a stage by the recipe of docs/contributing.md ("Adding a stage") is enough.

A toy stage, written here exactly as the recipe says (its module with ``stage.py`` ending in its
``SPEC`` and a ``commands.py``; its rule file, included by the Snakefile), is added to a copy of
this checkout, and nothing else is edited: no list of stages, no test registry, no CLI table. The
copy must then show it in the workflow's DAG, in the CLI, in its `.done` summary, in the yield
report and in diagnose's sentence for an empty site. Left without one piece of the recipe, the
same checks must fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

#: The toy stage's module: ``src/parasim/toy/stage.py``. It keeps a site's positives whose
#: English side is short, and explains an empty result.
TOY_STAGE = '''\
"""A toy stage: the positives of a site whose English side is at most 40 characters."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from parasim.io import POSITIVES_SCHEMA
from parasim.spec import Stage
from parasim.stats import Recorder, Stats


def keep_short(positives: pa.Table, rec: Recorder, max_chars: int = 40) -> pa.Table:
    """The rows of ``positives`` whose English side has at most ``max_chars`` characters."""
    rec.rows_in += positives.num_rows
    kept = positives.filter(pc.less_equal(pc.utf8_length(positives["en_text"]), max_chars))
    rec.drop("too_long", positives.num_rows - kept.num_rows)
    rec.rows_out += kept.num_rows
    return kept


def explain(site: str, stats: Stats) -> str:
    """Why no pair was short."""
    n = stats.dropped.get("too_long", 0)
    return f"0 short pairs for site {site}: {n} of {stats.rows_in} were longer than 40 characters"


SPEC = Stage(
    "toy",
    rules=("keep_short",),
    results=("toys",),
    upstream="clean",
    per="site",
    done="toys",
    metric="rows_out",
    label="short pairs",
    explain=explain,
    one_to_one=True,
    inputs={"positives": POSITIVES_SCHEMA},
    outputs={"out": POSITIVES_SCHEMA},
    run=keep_short,
)
'''

#: Its commands: ``src/parasim/toy/commands.py``.
TOY_COMMANDS = '''\
"""`parasim keep-short` (rule ``keep_short``): the toy stage as a command."""

from __future__ import annotations


def cmd_keep_short(args) -> None:
    """Keep the short positives of one site."""
    import pyarrow as pa

    from parasim.io import POSITIVES_SCHEMA, write_table
    from parasim.stagecli import read_input, stage_job
    from parasim.toy.stage import keep_short

    tables = [read_input(p, "positives shard", schema=POSITIVES_SCHEMA) for p in args.positives]
    with stage_job("toy", args.stats, site=args.site) as rec:
        write_table(keep_short(pa.concat_tables(tables), rec), args.out)


def register(add, site_opts) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("keep-short", cmd_keep_short, "The short positives of one site.")
    sp.add_argument("--site", required=True)
    sp.add_argument("--positives", nargs="+", required=True)
    sp.add_argument("--out", required=True)
    sp.add_argument("--stats")
'''

#: Its rule file: ``workflow/rules/toy.smk``, a rule per stage rule and its `.done` rule.
TOY_RULES = '''\
rule keep_short:
    """The toy stage: a site's short positives."""
    input:
        positives=shard_files("positives"),
    output:
        toys="results/toys/{site}/short.parquet",
        stats="results/stats/keep_short/{site}.json",
    log:
        "logs/keep_short/{site}.log",
    shell:
        "parasim keep-short --site {wildcards.site} --positives {input.positives}"
        " --out {output.toys} --stats {output.stats} > {log} 2>&1"


rule toy_done:
    """Target for the toy stage of one site."""
    input:
        shards=["results/toys/{site}/short.parquet"],
        stats=done_stats("toy"),
        upstream=upstream_stats("toy"),
    output:
        "results/toys/{site}.done",
    log:
        "logs/toy_done/{site}.log",
    params:
        allow_empty=allow_empty_flag(),
    shell:
        "parasim summarize --stage toy --site {wildcards.site} --stats {input.stats}"
        " --upstream {input.upstream} --shards {input.shards} --out {output}"
        " {params.allow_empty} > {log} 2>&1"
'''

#: The recipe's pieces, as the files they are (the rule file's include line goes with it).
PIECES = ("spec", "commands", "rule_file")

#: Run in the copy: the CLI lists the command; the command runs the stage on real positives;
#: its `.done` summary, the yield report and, for a site with no short pair, diagnose's
#: sentence. Prints one JSON line of what it saw.
_CHECKS = r"""
import contextlib, io, json, sys
from pathlib import Path
import pyarrow as pa
from parasim.cli import build_parser, main
from parasim.io import POSITIVES_SCHEMA, write_table

work = Path(sys.argv[1])
seen = {}
sub = next(a for a in build_parser()._actions if a.dest == "command")
seen["cli"] = "keep-short" in sub.choices
def positives(texts):
    rows = [{"id": f"p{i}", "pair_id": "pp", "site": "s", "domain": "d", "lang_pair": "en-fr",
             "other_lang": "fr", "en_text": t, "other_text": t, "method": "dp", "en_idx": [i],
             "other_idx": [i], "en_url": "u", "other_url": "v"} for i, t in enumerate(texts)]
    return pa.Table.from_pylist(rows, schema=POSITIVES_SCHEMA)
long = "A sentence much longer than the forty characters it may have."
for site, texts in {"s": ["Short one.", long], "empty": [long]}.items():
    write_table(positives(texts), work / f"{site}.parquet")
    stats = work / "stats" / "keep_short" / f"{site}.json"
    main(["keep-short", "--site", site, "--positives", str(work / f"{site}.parquet"),
          "--out", str(work / f"{site}-short.parquet"), "--stats", str(stats)])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["summarize", "--stage", "toy", "--site", site, "--stats", str(stats), "--shards",
                   str(work / f"{site}-short.parquet"), "--out", str(work / f"{site}.done")])
    seen[f"summarize_{site}"] = rc
    seen[f"stderr_{site}"] = err.getvalue()
done = json.loads((work / "s.done").read_text())
seen["done"] = {"rows": done["rows"], "dropped": done["stats"]["toy"]["dropped"]}
main(["yield-report", "--stats-root", str(work / "stats"), "--sites", "s", "--tsv",
      str(work / "y.tsv"), "--json", str(work / "y.json"), "--png", str(work / "y.png")])
seen["yield"] = [r for r in json.loads((work / "y.json").read_text()) if r["stage"] == "toy"]
print("SEEN=" + json.dumps(seen))
"""


def _copy_checkout(dest: Path) -> Path:
    """The checkout's code, workflow and shipped config (not its data) under ``dest``."""
    for name in ("src", "workflow", "demo", "profiles", "envs"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("Snakefile", "config.yaml"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


def add_toy_stage(checkout: Path, leave_out: str | None = None) -> None:
    """Add the toy stage to ``checkout`` by the recipe, but for the piece ``leave_out``."""
    pkg = checkout / "src" / "parasim" / "toy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A toy stage."""\n')
    stage = TOY_STAGE if leave_out != "spec" else TOY_STAGE[: TOY_STAGE.index("SPEC = ")]
    (pkg / "stage.py").write_text(stage)
    if leave_out != "commands":
        (pkg / "commands.py").write_text(TOY_COMMANDS)
    if leave_out != "rule_file":
        (checkout / "workflow" / "rules" / "toy.smk").write_text(TOY_RULES)
        snakefile = checkout / "Snakefile"
        text = snakefile.read_text(encoding="utf-8")
        last = 'include: "workflow/rules/models_table.smk"\n'
        assert last in text, "the Snakefile's last include moved: update this test"
        snakefile.write_text(text.replace(last, last + 'include: "workflow/rules/toy.smk"\n'))


def problems(checkout: Path, work: Path) -> list[str]:
    """What the copy fails to show of the toy stage (empty: everything)."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    work.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", _CHECKS, str(work)], capture_output=True, text=True, env=env
    )
    out: list[str] = []
    line = next((x for x in proc.stdout.splitlines() if x.startswith("SEEN=")), None)
    if line is None:
        out.append(f"the stage's checks did not run: {proc.stderr.strip().splitlines()[-1:]}")
    else:
        seen = json.loads(line[5:])
        if not seen["cli"]:
            out.append("no command keep-short in the CLI")
        if seen["summarize_s"] != 0 or seen["done"] != {"rows": 1, "dropped": {"too_long": 1}}:
            out.append(f"the .done summary: {seen['done']}")
        labels = {r["metric"]: r["value"] for r in seen["yield"]}
        if labels.get("funnel: short pairs") != 1 or labels.get("dropped.too_long") != 1:
            out.append(f"the yield report: {labels}")
        want = "0 short pairs for site empty: 1 of 1 were longer than 40 characters"
        if seen["summarize_empty"] != 2 or want not in seen["stderr_empty"]:
            out.append(f"diagnose: {seen['stderr_empty']!r}")
    out += _dag_problems(checkout, work, env)
    return out


def _dag_problems(checkout: Path, work: Path, env: dict) -> list[str]:
    """Whether a dry run of the shipped config plans the toy's jobs for every site."""
    cfg = yaml.safe_load((checkout / "config.yaml").read_text())
    for site in cfg["sites"]:
        site["serve_dir"] = str(checkout / site["serve_dir"])
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    snakemake = Path(sys.executable).parent / "snakemake"
    proc = subprocess.run(
        [str(snakemake), "-n", "--snakefile", str(checkout / "Snakefile"), "--directory",
         str(work / "run"), "--configfile", str(work / "config.yaml"), "--cores", "1"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    counts = {}
    for row in proc.stdout.splitlines():
        parts = row.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    n = len(cfg["sites"])
    if proc.returncode != 0 or counts.get("keep_short") != n or counts.get("toy_done") != n:
        lines = proc.stderr.strip().splitlines() or [""]
        tail = next((x for x in lines if "Exception" in x or "Error" in x), lines[-1])
        return [f"the DAG: keep_short x{counts.get('keep_short')}, toy_done x"
                f"{counts.get('toy_done')} (rc {proc.returncode}: {tail})"]  # fmt: skip
    return []


def test_a_stage_added_by_the_recipe_is_in_the_dag_cli_done_yield_and_diagnose(tmp_path):
    checkout = _copy_checkout(tmp_path / "checkout")
    add_toy_stage(checkout)
    assert problems(checkout, tmp_path / "work") == []


@pytest.mark.slow
@pytest.mark.parametrize("leave_out", PIECES)
def test_a_stage_missing_a_piece_of_the_recipe_is_not_found(tmp_path, leave_out):
    checkout = _copy_checkout(tmp_path / "checkout")
    add_toy_stage(checkout, leave_out=leave_out)
    found = problems(checkout, tmp_path / "work")
    assert found, f"without its {leave_out}, the toy stage was still found everywhere"


def test_the_recipe_in_the_docs_names_these_pieces():
    """The test follows the documented recipe: its pieces are the ones docs/contributing.md
    lists (so that a change of the recipe changes this test too)."""
    doc = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    recipe = doc[doc.index("### Adding a stage") :]
    recipe = recipe[: recipe.index("\n## ")]
    for piece in ("`SPEC`", "`commands.py`", "`register(add, site_opts)`", "workflow/rules/"):
        assert piece in recipe, piece
    assert "tests/test_add_a_stage.py" in recipe
    assert textwrap.dedent(TOY_STAGE).count("SPEC = Stage(") == 1
