"""The whole workflow runs the tests share (their session fixtures are in tests/conftest.py).

- ``site_run``: the fixture site (``test_workflow.fixture_site``) from scratch with ``--cores 2``;
  the end-to-end, global-stages, parameter-change and kill-9 tests read it, and so does the SLURM
  test as its local side.
- ``second_site_run``: a second run from scratch, for the tests that compare two runs (two clean
  runs agree; SLURM equals local). Through the one-node SLURM cluster (``profiles/slurm-local``)
  where one answers, as in CI, else locally: one run serves both comparisons.

Both are read-only: a test that changes a run makes its own.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from test_workflow import FIXTURE_RUN, ROOT, fixture_site, run_workflow, snakemake

#: The test cluster's workflow profile (scripts/slurm_cluster.sh makes the cluster).
SLURM_PROFILE = ROOT / "profiles" / "slurm-local"
SLURM_TIMEOUT = 2400


@dataclass(frozen=True)
class WorkflowRun:
    """A finished workflow run: its folder (``results/``, ``logs/``, ``config.yaml``), what
    Snakemake printed, and where its jobs ran (``local`` or ``slurm``)."""

    work: Path
    log: str
    executor: str


def slurm_unavailable() -> str | None:
    """Why no SLURM cluster can take the test's jobs, or None when one answers."""
    for tool in ("sbatch", "sinfo", "sacct"):
        if shutil.which(tool) is None:
            return f"`{tool}` not on PATH (bash scripts/slurm_cluster.sh install)"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return 'snakemake-executor-plugin-slurm not installed (pip install -e ".[slurm]")'
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%P %a %t"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "no SLURM cluster answers (`sinfo` timed out)"
    if proc.returncode != 0 or " up " not in proc.stdout:
        last = (proc.stdout + proc.stderr).strip().splitlines()[-1:]
        return f"no SLURM cluster answers (bash scripts/slurm_cluster.sh start): sinfo: {last}"
    return None


def slurm_run(work: Path) -> WorkflowRun:
    """The fixture site from scratch through ``profiles/slurm-local``."""
    fixture_site(work)
    proc = snakemake(
        "--snakefile", str(ROOT / "Snakefile"), "--directory", str(work),
        "--configfile", str(work / "config.yaml"), "--workflow-profile", str(SLURM_PROFILE),
        *FIXTURE_RUN,
        cwd=work,  # the SLURM executor puts its logs in .snakemake/slurm_logs of the cwd
        timeout=SLURM_TIMEOUT,
    )  # fmt: skip
    return WorkflowRun(work, proc.stdout + proc.stderr, "slurm")


def local_run(work: Path) -> WorkflowRun:
    """The fixture site from scratch with ``--cores 2``, a thread a job."""
    fixture_site(work)
    proc = run_workflow(work, *FIXTURE_RUN)
    return WorkflowRun(work, proc.stdout + proc.stderr, "local")
