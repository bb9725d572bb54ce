"""The one list of stages (parasim.stages) agrees with the workflow, the CLI and the stats.

The workflow's rules (names, outputs, shell commands) are read from the Snakefile as Snakemake
loads it, in a child process (loading it changes the working directory) on the shipped config.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from parasim import stages
from parasim.cli import build_parser, main
from parasim.diagnose import explain_empty
from parasim.io import POSITIVES_SCHEMA, rows_to_table, write_table
from parasim.report import yield_table
from parasim.stats import Stats

ROOT = Path(__file__).resolve().parents[1]

#: Prints every rule of the Snakefile as JSON: outputs (wildcard constraints stripped), shell.
_RULES = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.io import strip_wildcard_constraints
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from snakemake.settings.types import StorageSettings
root, work = Path(sys.argv[1]), Path(sys.argv[2])
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(
        resource_settings=ResourceSettings(),
        config_settings=ConfigSettings(configfiles=[work / "config.yaml"]),
        storage_settings=StorageSettings(),
        snakefile=root / "Snakefile",
        workdir=work,
    )
    rules = {
        r.name: {
            "output": [strip_wildcard_constraints(str(o)) for o in r.output],
            "input": [str(i) for i in r.input if isinstance(i, str)],
            "shell": r.shellcmd,
        }
        for r in wf._workflow.rules  # the loaded workflow (snakemake is pinned)
    }
print("RULES=" + json.dumps(rules))
"""


@pytest.fixture(scope="module")
def rules(tmp_path_factory) -> dict[str, dict]:
    """Every rule of the workflow, on the shipped config (its demo folders made absolute)."""
    work = tmp_path_factory.mktemp("workflow")
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    for site in cfg["sites"]:
        site["serve_dir"] = str(ROOT / site["serve_dir"])
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [sys.executable, "-c", _RULES, str(ROOT), str(work)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RULES="))
    return json.loads(line[len("RULES=") :])


def _under(path: str, folder: str) -> bool:
    return re.match(rf"results/{re.escape(folder)}(?=[/.\-{{]|$)", path) is not None


# ---------------------------------------------------------------- the registry itself


def test_names_rules_and_commands_are_unique():
    names = [s.name for s in stages.STAGES]
    rules = [r for s in stages.STAGES for r in s.rules]
    commands = [c for s in stages.STAGES for c in (*s.commands, *sum(s.aliases.values(), ()))]
    for what, items in (("names", names), ("rules", rules), ("commands", commands)):
        assert len(items) == len(set(items)), f"repeated {what}: {items}"
    for s in stages.STAGES:
        assert set(s.aliases) <= set(s.commands), s.name
        assert s.upstream is None or s.upstream in names, s.name
        assert set(s.done_covers) <= {u.name for u in stages.upstream_chain(s.name)}, s.name


def test_every_funnel_stage_can_be_reported_and_explained():
    for s in stages.FUNNEL:
        assert s.metric and s.label and s.explain, s.name
    for s in stages.STAGES:
        assert bool(s.done) <= bool(s.explain), f"{s.name}: a .done target explains an empty stage"


def test_every_module_imports_and_registers_commands():
    for s in stages.STAGES:
        importlib.import_module(s.module)
        assert callable(importlib.import_module(s.commands_from).register), s.name


def test_every_record_lies_in_its_stage_module_and_names_its_contract():
    """Each record is exported by the stage.py of its own package, names the function of its
    first rule from that package and a settings class of a config section, and its inputs and
    outputs are options of its first command."""
    from parasim.config import section_schema

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for s in stages.STAGES:
        assert f"{s.module}.stage" in stages.stage_modules(), s.name
        assert callable(s.run) and s.run.__module__.startswith(s.module), s.name
        if s.settings is not None:
            assert section_schema(s.settings.section)["properties"], s.name
        options = {a.dest for a in sub.choices[s.commands[0]]._actions}
        named = {*s.inputs, *s.outputs}
        assert named and named <= options, f"{s.name}: {sorted(named - options)} not options"


def test_every_command_and_its_older_names_are_in_the_cli():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for s in stages.STAGES:
        for cmd in s.commands:
            assert cmd in sub.choices, f"stage {s.name}: no command {cmd}"
            for old in s.aliases.get(cmd, ()):
                assert sub.choices[old] is sub.choices[cmd], (s.name, old)


# ---------------------------------------------------------------- the registry and the workflow


def test_every_rule_is_a_stage_rule_and_every_stage_rule_exists(rules):
    known = {r for s in stages.STAGES for r in s.rules}
    known |= {s.done_rule for s in stages.STAGES if s.done}
    assert known - set(rules) == set(), "in parasim.stages, not in the workflow"
    assert set(rules) - known - {"all"} == set(), "in the workflow, in no stage of parasim.stages"


def test_every_rule_runs_its_own_command(rules):
    """A stage's rule runs `parasim <rule with hyphens>` (or one of its older names)."""
    for s in stages.STAGES:
        for rule, cmd in zip(s.rules, s.commands, strict=True):
            ran = re.match(r"\s*parasim ([a-z0-9-]+)", rules[rule]["shell"]).group(1)
            assert stages.by_command(ran) == (cmd, s.aliases.get(cmd, ())), (rule, ran)


def test_every_output_lies_in_the_stage_results(rules):
    for s in stages.STAGES:
        outputs = [o for r in s.rules for o in rules[r]["output"]]
        stray = [o for o in outputs if o != s.stats and not any(_under(o, f) for f in s.results)]
        assert not stray, f"stage {s.name}: outputs outside results/{s.results}: {stray}"
        for folder in s.results:
            assert any(_under(o, folder) for o in outputs), f"{s.name}: nothing in {folder}"


def test_the_first_rule_writes_the_stats_and_the_done_rule_reads_them(rules):
    for s in stages.STAGES:
        if s.stats:
            assert s.stats in rules[s.rules[0]]["output"], s.name
        if s.done:
            done = rules[s.done_rule]
            assert f"results/{s.done}/{{site}}.done" in done["output"], s.name
            # the one `.done` command, `parasim summarize --stage <name>`, with its extras
            assert re.match(rf"\s*parasim summarize --stage {s.name}\b", done["shell"]), s.name
            for name in s.done_extras:
                assert f"--extra {name}=" in done["shell"], (s.name, name)


def test_rule_all_asks_for_every_done_target(rules):
    demo = yaml.safe_load((ROOT / "config.yaml").read_text())["sites"][0]["name"]
    wanted = rules["all"]["input"]
    for s in stages.STAGES:
        if s.done:
            assert f"results/{s.done}/{demo}.done" in wanted, s.name


# ---------------------------------------------------------------- drops add up, everywhere


def _synthetic(stage: stages.Stage, site: str, k: int) -> Stats:
    """A job's stats with a reason of every kind of name (one that ends like a ratio too)."""
    dropped = {"length_ratio": 25 + k, "too_short": 3, "error_rate": 1, "x_per_s": k}
    kept = 10 + k
    return Stats(
        stage.name,
        site=site,
        rows_in=kept + sum(dropped.values()),
        rows_out=kept,
        dropped=dropped,
        counts={"pairs_scored": kept, "translated": kept, "langid_en_ok": 4},
        seconds={"total": 0.5},
        figures={"pairs_per_s": 12.5},
    )


def _write(path: Path, stats: Stats) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stats.to_dict()))
    return str(path)


@pytest.mark.parametrize("stage", [s for s in stages.STAGES if s.per], ids=lambda s: s.name)
def test_reasons_in_done_and_yield_add_up_to_the_drops(stage, tmp_path):
    """Every reason of every job reaches the `.done` summary and the yield report (the clean
    stage's `length_ratio` drops once went missing: the key looked like a ratio)."""
    site, shards = "s", ["000", "001"]
    per_job = [_synthetic(stage, site, k) for k in range(2 if stage.per == "shard" else 1)]
    stats_root = tmp_path / "results" / "stats"
    files = []
    for s, shard in zip(per_job, shards, strict=False):
        rel = stage.stats.format(site=site, shard=shard)
        files.append(_write(tmp_path / rel, s))
    drops = sum(s.n_dropped for s in per_job)
    reasons = {r: sum(s.dropped[r] for s in per_job) for r in per_job[0].dropped}
    if stage.one_to_one:
        assert drops == sum(s.rows_in - s.rows_out for s in per_job)

    if stage.done:  # the `.done` summary
        shard = tmp_path / "shard.parquet"
        write_table(rows_to_table([], POSITIVES_SCHEMA), shard)
        done = tmp_path / "s.done"
        argv = ["summarize", "--stage", stage.name, "--site", site, "--shards", str(shard)]
        assert main([*argv, "--stats", *files, "--out", str(done), "--allow-empty"]) == 0
        own = json.loads(done.read_text())["stats"][stage.name]
        assert own["dropped"] == reasons and sum(own["dropped"].values()) == drops
        assert own["rows_in"] - own["rows_out"] == drops

    if stage.metric:  # the yield report
        rows = yield_table(stats_root, [site])
        got = {r["metric"]: r["value"] for r in rows if r["stage"] == stage.name}
        by_reason = {m[len("dropped.") :]: v for m, v in got.items() if m.startswith("dropped.")}
        assert by_reason == reasons and got["dropped"] == drops
        assert got["rows_in"] - got["rows_out"] == drops
        assert "pairs_per_s" not in got and "total" not in got  # figures and timings stay out

    if stage.explain:  # diagnose reads the same drops
        empty = Stats(stage.name, rows_in=drops, dropped=reasons)
        assert explain_empty(site, stage.name, {stage.name: empty})


def test_a_real_clean_run_counts_every_drop_in_done_and_yield(tmp_path):
    """The clean stage on a tiny site: every dropped pair is in the stats by its reason, and the
    `.done` summary and the yield report carry every reason (`length_ratio` too)."""
    pytest.importorskip("heliport")
    from collections import Counter

    import pyarrow.parquet as pq
    from test_clean import EN_LONG, FR_LONG, _aligned, _translated

    ratio = ("Yes", "Oui, absolument, sans aucun doute possible, et même davantage")
    mt = "Yes, absolutely, without any possible doubt, and even more"  # the translation
    rows = [("p1", EN_LONG, FR_LONG, 0), ("p1", *ratio, 1, mt)]
    rows += [("p2", "Same text", "Same text", 0)]
    rows += [("p2", EN_LONG, FR_LONG, 1)]  # a duplicate of p1's first line
    lines = [("p1", [EN_LONG, ratio[0]], [FR_LONG, ratio[1]])]
    lines += [("p2", ["Same text", EN_LONG], ["Same text", FR_LONG])]
    site, results = "s", tmp_path / "results"
    aligned, translated = tmp_path / "a.parquet", tmp_path / "t.parquet"
    write_table(_aligned(rows), aligned)
    write_table(_translated(lines), translated)
    clean, align = stages.get("clean"), stages.get("align")
    stats = tmp_path / clean.stats.format(site=site)
    positives, dropped = results / "positives" / site / "000.parquet", tmp_path / "d.parquet"
    argv = ["clean-positives", "--aligned", str(aligned), "--translated", str(translated)]
    argv += ["--out", str(positives), "--dropped", str(dropped), "--stats", str(stats)]
    assert main(argv) == 0

    s = Stats.read(stats)
    by_reason = Counter(pq.read_table(dropped).column("reason").to_pylist())
    assert s.dropped == by_reason and {"length_ratio", "identical", "duplicate"} <= set(by_reason)
    assert s.rows_in == len(rows) == s.rows_out + s.n_dropped

    # the positives' `.done` (align's stats, here of one page-pair shard, and clean's)
    align_stats = _write(
        tmp_path / align.stats.format(site=site, shard="000"), Stats("align", 2, 4)
    )
    done = tmp_path / "s.done"
    argv = ["summarize", "--stage", "clean", "--site", site, "--shards", str(positives)]
    assert main([*argv, "--stats", align_stats, str(stats), "--out", str(done)]) == 0
    summary = json.loads(done.read_text())
    assert summary["rows"] == s.rows_out and summary["stats"]["clean"]["dropped"] == by_reason
    assert summary["stats"]["align"]["rows_out"] == 4

    rows = yield_table(results / "stats", [site])
    got = {r["metric"]: r["value"] for r in rows if r["stage"] == "clean"}
    assert got["funnel: positives (cleaned)"] == s.rows_out
    assert got["dropped"] == sum(by_reason.values()) == got["rows_in"] - got["rows_out"]
    assert {m[8:]: v for m, v in got.items() if m.startswith("dropped.")} == by_reason
