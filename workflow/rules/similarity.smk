# The similarity models of seed 001 §4 (parasim.train.similarity): per encoder and training
# partition, k-fold CV on the corpus folds, voting, cross-corpus test accuracy; MSRP transfer when
# `eval.msrp_dir` is set. Target: results/models/similarity.done (the report's tables).

from parasim.train.similarity.settings import similarity_partitions

SIM_ENCODERS = list(config["train"]["similarity"]["encoders"])
SIM_PARTITIONS = similarity_partitions(config["corpus"], config["train"])
SIM_MODELS = "results/models/similarity-{encoder}-{partition}"
SIM_EVAL = "results/eval/similarity-{encoder}-{partition}"
MSRP_DIR = config["eval"]["msrp_dir"]


rule train_similarity:
    """Seed 001's protocol for one encoder and training partition (Tables 4-5).

    A partition with no rows or too few pairs for two folds, or whose folds hold one class, is a
    skipped model: metrics.json and the eval JSONs say why, and the run goes on. A rerun after a
    crash keeps the finished folds and resumes the running one from its last checkpoint.
    """
    input:
        corpus="results/corpus",
        code=code("train/core", "train/similarity"),
    output:
        metrics=f"{SIM_MODELS}/metrics.json",
        card=f"{SIM_MODELS}/README.md",
        curve=report(
            f"{SIM_MODELS}/training_curve.png",
            caption="../report/similarity_curve.rst",
            category="Models",
            subcategory="Similarity",
        ),
        cv=f"{SIM_EVAL}/cv.json",
        test=f"{SIM_EVAL}/test.json",
    log:
        "logs/train_similarity/{encoder}-{partition}.log",
    benchmark:
        "benchmarks/train_similarity/{encoder}-{partition}.tsv"
    wildcard_constraints:
        encoder="|".join(SIM_ENCODERS) or "bilstm",
        partition="|".join(re.escape(p) for p in SIM_PARTITIONS) or "EN-FR-G",
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=120,
        gpu=1,  # CUDA + bf16 autocast when present; runs on the CPU without one
    params:
        train=section_json("train"),
        corpus=section_json("corpus"),
    shell:
        "parasim train-similarity --corpus {input.corpus} --encoder {wildcards.encoder}"
        " --partition {wildcards.partition} --corpus-json {params.corpus:q}"
        " --settings-json {params.train:q} --out $(dirname {output.metrics})"
        " --eval-out $(dirname {output.cv}) > {log} 2>&1"


rule eval_similarity_msrp:
    """MSRP zero-shot, transfer + fine-tuning and from-scratch accuracy (seed 001 Tables 5-6).

    Runs only when `eval.msrp_dir` points at the user's MSRP copy.
    """
    input:
        metrics=f"{SIM_MODELS}/metrics.json",
        msrp=(
            [
                f"{MSRP_DIR}/msr_paraphrase_train.txt",
                f"{MSRP_DIR}/msr_paraphrase_test.txt",
            ]
            if MSRP_DIR
            else []
        ),
        code=code("train/core", "train/similarity", "train/eval/msrp"),
    output:
        f"{SIM_EVAL}/msrp.json",
    log:
        "logs/eval_similarity_msrp/{encoder}-{partition}.log",
    wildcard_constraints:
        encoder="|".join(SIM_ENCODERS) or "bilstm",
        partition="|".join(re.escape(p) for p in SIM_PARTITIONS) or "EN-FR-G",
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
        gpu=1,
    params:
        train=section_json("train"),
        msrp=MSRP_DIR,
    shell:
        "parasim eval-similarity-msrp --model $(dirname {input.metrics})/model"
        " --msrp {params.msrp} --settings-json {params.train:q} --out {output} > {log} 2>&1"


rule similarity_report:
    """Seed 001's results tables for every similarity model, baselines beside them."""
    input:
        cv=expand(f"{SIM_EVAL}/cv.json", encoder=SIM_ENCODERS, partition=SIM_PARTITIONS),
        test=expand(
            f"{SIM_EVAL}/test.json", encoder=SIM_ENCODERS, partition=SIM_PARTITIONS
        ),
        msrp=(
            expand(
                f"{SIM_EVAL}/msrp.json", encoder=SIM_ENCODERS, partition=SIM_PARTITIONS
            )
            if MSRP_DIR
            else []
        ),
        code=code("train/similarity"),
    output:
        html=report(
            "results/eval/similarity/tables.html",
            caption="../report/similarity_tables.rst",
            category="Models",
            subcategory="Similarity",
        ),
        json="results/eval/similarity/tables.json",
        done=touch("results/models/similarity.done"),
    log:
        "logs/similarity_report.log",
    conda:
        "../../envs/nlp.yaml"
    params:
        dirs=lambda wc, input: sorted({str(Path(f).parent) for f in input.cv}),
    shell:
        "parasim similarity-report --eval-dirs {params.dirs} --html {output.html}"
        " --json {output.json} > {log} 2>&1"
