from parasim.paths import shared_data

#: The divergence ranker's folder.
RANKER_DIR = "results/models/divergence-ranker"
#: S3BERT's folder.
S3BERT_DIR = "results/models/s3bert"

#: STSb-multi-mt: `train.sts`, or the project's real-data folder beside the checkout.
STS_DIR = config["train"]["sts"] or str(shared_data("sts", "stsb-multi-mt"))
#: `--sts <folder>` for S3BERT's forgetting check (and the entity-siamese model's evaluation,
#: workflow/rules/entity_siamese.smk, included after this file) when STSb is there, else nothing.
STS_FLAG = f"--sts {STS_DIR}" if Path(STS_DIR, "stsb-en-dev.csv").exists() else ""
#: REFreSD dev: `train.refresd`, or the project's real-data folder beside the checkout.
REFRESD_DIR = config["train"]["refresd"] or str(shared_data("refresd"))


rule train_divergence_ranker:
    """The divergence ranker (seed 000 §3.3-3.4) on every site's synthetic divergences.

    In `rule all` (the shipped `train:` defaults train a small one); with no usable ranking
    group anywhere it writes a `skipped` record instead of a model and the run goes on.

    The corpus test split's page pairs (from the positives, `corpus:` settings) stay out of
    training. A rerun after a crash resumes from the last checkpoint in RANKER_DIR/checkpoints.
    Several GPUs: run the command under `accelerate launch --multi_gpu` (README).
    With REFreSD dev present (`train.refresd`, or the real-data folder beside the checkout) the
    verdict in metrics and card is the model's against the untrained cosine there.
    """
    input:
        divergences=expand(
            "results/divergences/{site}/{shard}.parquet", site=SITES, shard=SHARDS
        ),
        positives=expand(
            "results/positives/{site}/{shard}.parquet", site=SITES, shard=SHARDS
        ),
        code=code("train/core", "train/ranker", "train/eval/refresd"),
    output:
        model=directory(f"{RANKER_DIR}/model"),
        card=f"{RANKER_DIR}/README.md",
        metrics=f"{RANKER_DIR}/metrics.json",
        curve=report(
            f"{RANKER_DIR}/training_curve.png",
            caption="../report/training_curve.rst",
            category="Models",
        ),
    log:
        "logs/train_divergence_ranker.log",
    benchmark:
        "benchmarks/train_divergence_ranker.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=1,  # CUDA + bf16 autocast when present; runs on the CPU without one
    params:
        train=section_json("train"),
        corpus=section_json("corpus"),
        refresd=REFRESD_DIR,
    shell:
        "parasim train-divergence-ranker --divergences {input.divergences} --positives {input.positives}"
        " --corpus-json {params.corpus:q} --settings-json {params.train:q}"
        " --refresd {params.refresd:q} --out $(dirname {output.metrics}) > {log} 2>&1"


rule eval_divergence_ranker:
    """REFreSD dev measures of the ranker (seed 000 Tables 3-4), baselines beside them.

    Not in `rule all` (REFreSD lives outside the project): `snakemake
    results/eval/divergence-ranker/refresd.json`.
    """
    input:
        model=f"{RANKER_DIR}/model",
        refresd=REFRESD_DIR,
        code=code("train/core", "train/ranker", "train/eval/refresd"),
    output:
        "results/eval/divergence-ranker/refresd.json",
    log:
        "logs/eval_divergence_ranker.log",
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
        gpu=1,
    shell:
        "parasim eval-divergence-ranker --model {input.model} --refresd {input.refresd}"
        " --out {output} > {log} 2>&1"


rule train_s3bert:
    """S3BERT (seed 002 §3): AMR-aspect sub-embeddings trained on every site's scored pairs.

    Reads the scores stage's shards (English side, translation of the other side, 15 aspects);
    writes the model folder, card, metrics (per-aspect Spearman beside SB-full and SB-rand, STSb
    dev before and after) and the training curve. Resumes from its last checkpoint after a crash.
    """
    input:
        scores=expand("results/scores/{site}/{shard}.parquet", site=SITES, shard=SHARDS),
        code=code("train/core", "train/s3bert", "train/eval/sts"),
    output:
        model=directory(f"{S3BERT_DIR}/model"),
        card=f"{S3BERT_DIR}/README.md",
        metrics=f"{S3BERT_DIR}/metrics.json",
        curve=report(
            f"{S3BERT_DIR}/training_curve.png",
            caption="../report/training_curve.rst",
            category="Models",
        ),
    log:
        "logs/train_s3bert.log",
    benchmark:
        "benchmarks/train_s3bert.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=240,
        gpu=1,  # CUDA + bf16 autocast when present; runs on the CPU without one
    params:
        train=section_json("train"),
        sts=STS_FLAG,
    shell:
        "parasim train-s3bert --scores {input.scores} {params.sts}"
        " --settings-json {params.train:q} --out $(dirname {output.metrics}) > {log} 2>&1"
