"""The cluster profiles name every rule that asks for a GPU (a new rule forgotten there makes
the test cluster refuse the job: it has no GPU)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def gpu_rules() -> set[str]:
    """Rules whose resources say ``gpu=1`` in workflow/rules/*.smk."""
    out = set()
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        rule = None
        for line in smk.read_text("utf-8").splitlines():
            m = re.match(r"rule (\w+):", line)
            if m:
                rule = m.group(1)
            elif rule and re.match(r"\s+gpu=1\b", line):
                out.add(rule)
    return out


def test_gpu_rules_are_found():
    wanted = {"train_divergence_ranker", "train_entity_siamese", "select_negatives_partition"}
    assert wanted <= gpu_rules()


def test_the_test_cluster_runs_every_gpu_rule_on_its_cpus():
    cfg = yaml.safe_load((ROOT / "profiles" / "slurm-local" / "config.yaml").read_text("utf-8"))
    on_cpu = {r for r, res in cfg["set-resources"].items() if res.get("gpu") == 0}
    assert gpu_rules() <= on_cpu, sorted(gpu_rules() - on_cpu)


def test_the_slurm_profile_sends_every_gpu_rule_to_the_gpu_partition():
    cfg = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text("utf-8"))
    gpu = {r for r, res in cfg["set-resources"].items() if res.get("slurm_partition") == "gpu"}
    assert gpu_rules() <= gpu, sorted(gpu_rules() - gpu)
