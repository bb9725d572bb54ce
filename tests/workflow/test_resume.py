"""Trust: a run killed with SIGKILL mid-stage resumes without recomputing finished jobs and ends
with the same shards as an uninterrupted run; two clean runs agree; a parameter change reruns
only the stage it belongs to and what depends on it."""

import hashlib
import json
import os
import signal
import subprocess
import time
from base64 import urlsafe_b64decode
from pathlib import Path

import pytest
import yaml
from test_workflow import (
    FIXTURE_RUN,
    SNAKEMAKE,
    fixture_site,
    run_workflow,
    snakemake,
    workflow_args,
)

#: Outputs that must be byte-identical between runs: every stage's shards. The divergences too:
#: eflomal, their word aligner, runs seeded (src/parasim/divergences/wordalign.py).
BYTE_IDENTICAL = (
    "pairs", "lines", "translated", "aligned", "positives", "dropped", "topics", "negatives",
    "corpus", "divergences", "scores",
)  # fmt: skip


def _hashes(work: Path, stages=BYTE_IDENTICAL) -> dict[str, str]:
    """sha256 of every shard; a per-partition negatives part (``negatives/parts/``) by its rows
    only: its metadata carries the job's timings to the gather's stats, and the gathered
    ``negatives.parquet`` is compared byte for byte."""
    import pyarrow.parquet as pq

    out = {}
    for stage in stages:
        for p in sorted((work / "results" / stage).rglob("*.parquet")):
            if p.parent.name == "parts" and stage == "negatives":
                rows = pq.read_table(p).replace_schema_metadata(None)
                digest = hashlib.sha256(repr(rows.to_pylist()).encode()).hexdigest()
            else:
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
            out[str(p.relative_to(work))] = digest
    return out


def _ranker(work: Path) -> tuple[dict, dict]:
    """The trained ranker's weights (encoder and heads) and its data counts.

    Its folder is not byte-compared: metrics.json and the card carry wall times and speeds. The
    weights must be equal tensor for tensor (seeded, CPU, same thread count) and trained on the
    same pairs."""
    from safetensors.torch import load_file

    from parasim.train.core.storage import load_weights

    folder = work / "results" / "models" / "divergence-ranker"
    # the encoder in the sharded layout the model folders share weights in, the heads apart
    weights = {f"encoder:{k}": v for k, v in load_weights(folder / "model").items()}
    heads = load_file(str(folder / "model" / "ranker_heads.safetensors"))
    weights |= {f"heads:{k}": v for k, v in heads.items()}
    metrics = json.loads((folder / "metrics.json").read_text())
    return weights, {"data": metrics["data"], "steps": metrics["train"]["step"]}


def _same_ranker(a: Path, b: Path) -> None:
    (wa, ma), (wb, mb) = _ranker(a), _ranker(b)
    assert ma == mb
    assert wa.keys() == wb.keys()
    assert all(wa[k].equal(wb[k]) for k in wa), [k for k in wa if not wa[k].equal(wb[k])][:5]


def _incomplete(work: Path) -> set[str]:
    """Outputs Snakemake marked incomplete (jobs that were running when the run died)."""
    root = work / ".snakemake" / "incomplete"
    out = set()
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f == "migration_underway":
                continue
            rel = Path(dirpath, f).relative_to(root).parts
            b64 = "".join(part.lstrip("@") for part in rel)
            out.add(str(Path(urlsafe_b64decode(b64).decode())))
    return out


@pytest.fixture(scope="module")
def reference(site_run):
    """The session's run of the fixture site (tests/workflow/runs.py), read-only."""
    return site_run.work


@pytest.mark.slow
def test_parameter_change_reruns_its_stage_and_dependants_only(reference, tmp_path):
    cfg = yaml.safe_load((reference / "config.yaml").read_text())
    cfg["divergences"]["per_type"] = 2
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(cfg))
    args = workflow_args(reference, "-n", "--quiet", "rules")
    args[args.index("--configfile") + 1] = str(changed)
    out = snakemake(*args, cwd=reference).stdout
    rules = {
        ln.split()[0] for ln in out.splitlines() if len(ln.split()) == 2 and ln.split()[1].isdigit()
    } - {"total"}
    # the scores read the divergences: they and the models trained on them follow; so do the
    # word pairs (they read the divergences' seed links: train.align_encoder.links) and the
    # aligned encoder trained on them; and the corpus, whose divergent grade they are part of
    # (issue 49), with every model trained on the corpus
    assert rules == {
        "make_divergences", "divergences_done", "score_pairs", "scores_done", "yield_report",
        "train_divergence_ranker", "train_s3bert", "train_entity_siamese",
        "align_encoder_wordpairs", "train_align_encoder", "models_table", "all",
        "build_corpus", "train_similarity", "similarity_report", "train_graded_encoder",
    }, out  # fmt: skip


@pytest.mark.slow
def test_kill_9_mid_run_resumes_and_ends_identical(reference, tmp_path):
    work = tmp_path / "run"
    fixture_site(work)
    log = (tmp_path / "killed.log").open("w")
    proc = subprocess.Popen(
        [*SNAKEMAKE, *workflow_args(work, *FIXTURE_RUN)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: kill snakemake and every job at once
    )
    # Kill once the translation of some shard is finished: later stages are then mid-way.
    deadline = time.monotonic() + 600
    while not list((work / "results" / "translated").rglob("*.parquet")):
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "no translated shard after 600 s"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (work / "results" / "corpus").exists(), "killed too late to test anything"

    incomplete = _incomplete(work)
    finished = {
        p: p.stat().st_mtime_ns
        for p in (work / "results").rglob("*")
        if p.is_file()
        and p.suffix in {".parquet", ".json", ".done"}
        and "crawl_state" not in p.parts
        and str(p.relative_to(work)) not in incomplete
    }
    assert finished, "nothing had finished before the kill"

    # A killed Snakemake leaves its lock behind: unlock, then the same command again
    # (profiles/default sets rerun-incomplete, so the interrupted jobs start over).
    run_workflow(work, "--unlock")
    run_workflow(work, *FIXTURE_RUN)
    changed = [str(p) for p, mtime in finished.items() if p.stat().st_mtime_ns != mtime]
    assert not changed, f"finished outputs were recomputed: {changed}"
    assert _hashes(work) == _hashes(reference)
    _same_ranker(work, reference)


@pytest.mark.slow
def test_two_clean_runs_give_identical_shards(reference, second_site_run):
    """Every stage's shards and the trained ranker, from two runs from scratch (the second
    through SLURM where a cluster answers: tests/workflow/runs.py)."""
    got, want = _hashes(second_site_run.work), _hashes(reference)
    for stage in ("positives", "corpus", "divergences", "scores"):
        assert any(k.startswith(f"results/{stage}/") for k in want), (stage, want)
    assert got == want
    _same_ranker(second_site_run.work, reference)
