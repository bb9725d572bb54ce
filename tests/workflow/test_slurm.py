"""The workflow on a real SLURM cluster: the fixture site once locally, once through
profiles/slurm-local (the session's two runs: tests/workflow/runs.py).

Needs a cluster that answers `sinfo`: `bash scripts/slurm_cluster.sh install && bash
scripts/slurm_cluster.sh start` makes a one-node one on this machine, with the account and
partition of the profile. Skipped when there is none, unless PARASIM_REQUIRE_SLURM=1 (CI), where
that is a failure.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from runs import ROOT, SLURM_PROFILE

STAGES = ("positives", "divergences", "corpus")


def _local_rules() -> set[str]:
    """The rules the Snakefile's `localrules:` block names (Snakemake runs them itself)."""
    text = (ROOT / "Snakefile").read_text()
    block = re.search(r"^localrules:\n((?:[ \t]+\w+,?\n)+)", text, re.M)
    assert block, "no localrules block in the Snakefile"
    return {name.strip(" \t,") for name in block.group(1).splitlines()}


def _jobs(log: str) -> tuple[Counter, Counter]:
    """Jobs per rule that Snakemake submitted (`rule x:`) and that it ran itself (`localrule x:`).

    Without an executor every job is a `localrule`; with SLURM only the rules the Snakefile
    names in `localrules:` (bookkeeping: the `.done` targets and the reports) are.
    """
    remote = Counter(re.findall(r"^rule (\w+):$", log, re.M))
    local = Counter(re.findall(r"^localrule (\w+):$", log, re.M))
    return remote, local


def _sacct(run_id: str) -> list[dict[str, str]]:
    fields = ["JobIDRaw", "State", "Account", "Partition", "Comment", "ExitCode"]
    proc = subprocess.run(
        [
            "sacct",
            "-X",
            "--parsable2",
            "--noheader",
            "--clusters",
            "all",
            "--starttime",
            "now-1days",
            "--name",
            run_id,
            "--format",
            ",".join(fields),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return [dict(zip(fields, line.split("|"), strict=True)) for line in proc.stdout.splitlines()]


def _rule_of(comment: str, rules) -> str | None:
    """The rule of a job from the comment the executor gives it (rule_<rule>[_wildcards_...])."""
    for rule in sorted(rules, key=len, reverse=True):
        if comment == f"rule_{rule}" or comment.startswith(f"rule_{rule}_wildcards_"):
            return rule
    return None


def _differing_columns(a: pa.Table, b: pa.Table) -> list[str]:
    """Columns that differ between rows of the same id (row order aside), and unmatched ids."""
    if "id" not in a.column_names:
        return [c for c in a.column_names if a.num_rows != b.num_rows or not a[c].equals(b[c])]
    ra = {r["id"]: r for r in a.to_pylist()}
    rb = {r["id"]: r for r in b.to_pylist()}
    cols = {c for i in ra.keys() & rb.keys() for c in ra[i] if ra[i][c] != rb[i].get(c)}
    only = len(ra.keys() ^ rb.keys())
    return sorted(cols) + ([f"{only} ids in one run only"] if only else [])


def _compare_shards(local: Path, remote: Path) -> list[dict]:
    """Per stage and shard: bytes identical, tables equal, and which columns differ."""
    out = []
    for stage in STAGES:
        a_root, b_root = local / "results" / stage, remote / "results" / stage
        a = sorted(p.relative_to(a_root) for p in a_root.rglob("*.parquet"))
        b = sorted(p.relative_to(b_root) for p in b_root.rglob("*.parquet"))
        assert a, f"no shards under {a_root}"
        assert a == b, (stage, a, b)
        for rel in a:
            ta, tb = pq.read_table(a_root / rel), pq.read_table(b_root / rel)
            row = {
                "shard": f"{stage}/{rel}",
                "bytes": (a_root / rel).read_bytes() == (b_root / rel).read_bytes(),
                "table": ta.equals(tb),
                "columns": [],
            }
            if not row["table"]:
                row["columns"] = _differing_columns(ta, tb)
            out.append(row)
    return out


@pytest.mark.slurm
@pytest.mark.slow
def test_site_through_slurm_equals_local_run(slurm_cluster, site_run, second_site_run):
    profile = yaml.safe_load((SLURM_PROFILE / "config.yaml").read_text())
    account = str(profile["default-resources"]["slurm_account"])
    partition = str(profile["default-resources"]["slurm_partition"])
    assert second_site_run.executor == "slurm"
    local, local_log = site_run.work, site_run.log
    remote, slurm_log = second_site_run.work, second_site_run.log

    # Every job Snakemake did not run itself went through SLURM and finished there.
    remote_jobs, ran_locally = _jobs(slurm_log)
    assert remote_jobs, slurm_log
    local_rules = _local_rules()
    assert "all" in local_rules and "scores_done" in local_rules, local_rules
    assert set(ran_locally) == local_rules & set(_jobs(local_log)[1]), ran_locally
    assert remote_jobs + ran_locally == sum(_jobs(local_log), Counter())
    run_id = re.search(r"SLURM run ID: (\S+)", slurm_log).group(1)
    records = _sacct(run_id)
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", slurm_log)
    assert sorted(r["JobIDRaw"] for r in records) == sorted(submitted), (records, slurm_log)
    for r in records:
        assert r["State"] == "COMPLETED" and r["ExitCode"] == "0:0", r
        assert (r["Account"], r["Partition"]) == (account, partition), r
    by_rule = Counter(_rule_of(r["Comment"], remote_jobs) for r in records)
    assert by_rule == remote_jobs, (by_rule, remote_jobs)
    # and each left its SLURM log (slurm-keep-successful-logs in the profile)
    logs = remote / ".snakemake" / "slurm_logs"
    log_ids = sorted(p.stem for p in logs.rglob("*.log"))
    assert log_ids == sorted(submitted), (log_ids, submitted)

    # The same shards out of both runs, byte for byte (eflomal runs seeded).
    report = _compare_shards(local, remote)
    for r in report:
        print(
            f"{r['shard']}: bytes {'identical' if r['bytes'] else 'differ'}, table "
            + ("equal" if r["table"] else f"differs in {', '.join(r['columns'])}")
        )
    assert {r["shard"].split("/")[0] for r in report} == set(STAGES), report
    for r in report:
        assert r["bytes"], r
