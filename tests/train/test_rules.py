"""The training rules and their commands: each rule runs `parasim <its name, hyphenated>`, the
former command names still work, and each rule declares the code its command runs."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The rule files of the model families (workflow/rules/).
RULE_FILES = (
    "train.smk",
    "similarity.smk",
    "align_encoder.smk",
    "entity_siamese.smk",
    "graded_encoder.smk",
)
#: Former command names, kept as aliases of the rules' names.
ALIASES = {
    "train-ranker": "train-divergence-ranker",
    "eval-ranker": "eval-divergence-ranker",
    "similarity-table": "similarity-report",
    "align-wordpairs": "align-encoder-wordpairs",
    "eval-cwr": "eval-align-encoder",
}


@functools.cache
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


@functools.cache
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
        "train_graded_encoder",
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


# --- the code each rule declares ------------------------------------------------------------------

SRC = ROOT / "src" / "parasim"


def module_file(name: str) -> Path | None:
    """The file of module ``name`` (``parasim.x.y``) in src/, or None when it is not one."""
    base = SRC.joinpath(*name.split(".")[1:])
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def imported_modules(nodes, package: str) -> set[str]:
    """The parasim modules imported anywhere in ``nodes`` (function bodies included); ``from p
    import n`` counts ``p.n`` when that is a module, else ``p``."""
    out = set()
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if module_file(f"{base}.{a.name}")]
            out.update(subs or [base])
    return {m for m in out if m.startswith("parasim.") and module_file(m)}


def train_closure(start: set[str], seen: set[str]) -> set[str]:
    """The parasim.train modules ``start`` runs: what they import, transitively, and the packages
    above each (Python runs their ``__init__``); the modules of ``seen`` are not walked again."""
    seen = set(seen)
    todo = [m for m in start if m.startswith("parasim.train")]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        todo += [
            ".".join(parts[:k]) for k in range(2, len(parts)) if ".".join(parts[:k]) not in seen
        ]
        if name in seen:
            continue
        seen.add(name)
        f = module_file(name)
        package = name if f.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(f.read_text(encoding="utf-8"))
        todo += [m for m in imported_modules(tree.body, package) if m.startswith("parasim.train")]
    return seen


def command_modules(command: str) -> set[str]:
    """The parasim.train modules ``parasim <command>`` runs: its commands module, and what the
    module's top level and the command's handler import, transitively (not the module's other
    handlers: another rule's command)."""
    func = subcommands()[command].get_default("func")
    name = func.__module__
    tree = ast.parse(module_file(name).read_text(encoding="utf-8"))
    body = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)]
    body += [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == func.__name__]
    start = imported_modules(body, name.rpartition(".")[0])
    parts = name.split(".")
    return train_closure(start | {".".join(parts[:k]) for k in range(2, len(parts))}, {name})


def covered(f: Path, declared: list[str]) -> bool:
    """Whether ``code(*declared)`` (workflow/rules/common.smk: folders, or modules without .py)
    lists ``f``."""
    for d in declared:
        p = SRC / d
        if (p.is_dir() and p in f.parents) or p.with_suffix(".py") == f:
            return True
    return False


def test_declared_code_exists():
    for rule, r in training_rules().items():
        for d in r["code"]:
            assert (SRC / d).is_dir() or (SRC / f"{d}.py").is_file(), (rule, d)


@pytest.mark.parametrize("rule", sorted(training_rules()))
def test_each_rule_declares_the_train_code_its_command_runs(rule):
    """Editing a module of parasim.train reruns every rule whose command runs it: the rule's
    code(...) lists it; a package __init__ it does not list imports nothing (only a docstring)."""
    r = training_rules()[rule]
    missing = []
    for name in sorted(command_modules(r["command"])):
        f = module_file(name)
        if covered(f, r["code"]):
            continue
        if f.name == "__init__.py" and not imported_modules([ast.parse(f.read_text())], name):
            body = ast.parse(f.read_text()).body
            if all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body):
                continue
        missing.append(str(f.relative_to(SRC)))
    assert not missing, f"rule {rule} runs {missing} but its code(...) does not list them"


def test_a_rule_declares_only_its_own_family():
    """The point of declaring code per rule: a family's rules list no other family's package."""
    families = {p.name for p in (SRC / "train").iterdir() if (p / "commands.py").is_file()}
    for rule, r in training_rules().items():
        listed = {d.split("/")[1] for d in r["code"] if d.startswith("train/")} & families
        assert len(listed) == 1, (rule, listed)
