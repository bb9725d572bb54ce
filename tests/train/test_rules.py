"""The training rules and their commands: each rule runs `parasim <its name, hyphenated>`, the
former command names still work, and each rule declares the code its command runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The rule files of the model families (workflow/rules/).
RULE_FILES = ("train.smk", "similarity.smk", "align_encoder.smk", "entity_siamese.smk")
#: Former command names, kept as aliases of the rules' names.
ALIASES = {
    "train-ranker": "train-divergence-ranker",
    "eval-ranker": "eval-divergence-ranker",
    "similarity-table": "similarity-report",
    "align-wordpairs": "align-encoder-wordpairs",
    "eval-cwr": "eval-align-encoder",
}


def training_rules() -> dict[str, dict]:
    """``{rule: {"command": the parasim command its shell runs, "code": its code(...) paths}}``."""
    rules = {}
    for name in RULE_FILES:
        text = (ROOT / "workflow" / "rules" / name).read_text(encoding="utf-8")
        for block in re.split(r"^(?=rule \w+:)", text, flags=re.M)[1:]:
            rule = re.match(r"rule (\w+):", block).group(1)
            command = re.search(r'"parasim ([\w-]+)', block)
            code = re.search(r"\bcode=code\(([^)]*)\)", block)
            rules[rule] = {
                "command": command.group(1) if command else None,
                "code": re.findall(r'"([^"]+)"', code.group(1)) if code else [],
            }
    return rules


def subcommands() -> dict:
    """The `parasim` parser's subcommands, name (or alias) -> parser."""
    import argparse

    from parasim.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_the_rule_files_hold_every_training_rule():
    assert set(training_rules()) == {
        "train_divergence_ranker", "eval_divergence_ranker", "train_s3bert", "train_similarity",
        "eval_similarity_msrp", "similarity_report", "align_encoder_wordpairs",
        "train_align_encoder", "eval_align_encoder", "train_entity_siamese",
    }  # fmt: skip


def test_each_training_rule_runs_the_command_of_its_name():
    cmds = subcommands()
    for rule, r in training_rules().items():
        assert r["command"] == rule.replace("_", "-"), rule
        assert r["command"] in cmds, rule


@pytest.mark.parametrize("old, new", sorted(ALIASES.items()))
def test_former_command_names_are_aliases(old, new):
    cmds = subcommands()
    assert cmds[old] is cmds[new]
    assert cmds[old].get_default("func") is cmds[new].get_default("func")
