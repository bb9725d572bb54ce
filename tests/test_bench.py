"""`parasim bench <name>`: every module of parasim.bench with a main() is a benchmark."""

import subprocess
import sys

import pytest

import parasim.bench
from parasim.cli import main

STAGES = [
    "align",
    "crawl",
    "divergences",
    "e5",
    "models",
    "negatives",
    "pairs",
    "site",
    "translate",
]


def test_every_stage_benchmark_is_listed(capsys):
    names = parasim.bench.available()
    assert set(STAGES + ["workflow"]) <= set(names)
    assert all(names.values()), names  # each has a one-line summary
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in names:
        assert f"  {name} " in out


def test_a_new_module_is_picked_up(tmp_path, monkeypatch, capsys):
    (tmp_path / "toy.py").write_text(
        '"""A toy benchmark."""\n\n\ndef main(argv=None):\n    print("toy ran with", argv)\n'
    )
    (tmp_path / "helper.py").write_text('"""No main: not a benchmark."""\n')
    monkeypatch.setattr(parasim.bench, "__path__", [*parasim.bench.__path__, str(tmp_path)])
    names = parasim.bench.available()
    assert names["toy"] == "A toy benchmark." and "helper" not in names
    assert main(["bench", "toy", "--n", "3"]) == 0
    assert "toy ran with ['--n', '3']" in capsys.readouterr().out
    sys.modules.pop("parasim.bench.toy", None)


def test_unknown_benchmark_is_an_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "nope"])
    assert exc.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_each_benchmark_runs_as_a_module():
    for name in ["pairs", "site"]:
        proc = subprocess.run(
            [sys.executable, "-m", f"parasim.bench.{name}", "--help"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert f"usage: parasim bench {name}" in proc.stdout
    cmd = [sys.executable, "-m", "parasim.bench", "--help"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "workflow" in proc.stdout
