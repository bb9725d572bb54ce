# The entity-enriched Siamese model of seed 004 §3 (parasim.train.entity_siamese): the
# bi-encoder's cosine and the scores stage's entity cosines into an MLP, evaluated on the corpus
# test split and STSb-multi-mt dev (en-fr, en-es). Target: results/models/entity-siamese.

ENTITY_DIR = "results/models/entity-siamese"
ENTITY_EVAL = "results/eval/entity-siamese"


rule train_entity_siamese:
    """Encoder (cosine regression) then MLP on cosine + entity cosines; BM25 silver optional.

    No score shards, no entity scores (scores.entities: false), no training rows or one class
    only: a skipped model whose metrics.json says why, and the run goes on. A rerun after a
    crash keeps a finished encoder and resumes a running part from its last checkpoint.
    """
    input:
        corpus="results/corpus",
        scores=expand("results/scores/{site}/{shard}.parquet", site=SITES, shard=SHARDS),
        done=expand("results/scores/{site}.done", site=SITES),
        code=code("train/core", "train/entity_siamese", "train/eval/sts"),
    output:
        metrics=f"{ENTITY_DIR}/metrics.json",
        card=f"{ENTITY_DIR}/README.md",
        curve=report(
            f"{ENTITY_DIR}/training_curve.png",
            caption="../report/entity_siamese_curve.rst",
            category="Models",
            subcategory="Entity Siamese",
        ),
        test=f"{ENTITY_EVAL}/test.json",
        sts=f"{ENTITY_EVAL}/sts.json",
        table=report(
            f"{ENTITY_EVAL}/table.html",
            caption="../report/entity_siamese_table.rst",
            category="Models",
            subcategory="Entity Siamese",
        ),
    log:
        "logs/train_entity_siamese.log",
    benchmark:
        "benchmarks/train_entity_siamese.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=120,
        gpu=1,  # CUDA + bf16 autocast when present; runs on the CPU without one
    params:
        train=section_json("train"),
        sts=STS_FLAG,
    shell:
        "parasim train-entity-siamese --corpus {input.corpus} --scores {input.scores}"
        " {params.sts} --settings-json {params.train:q} --out $(dirname {output.metrics})"
        " --eval-out $(dirname {output.test}) > {log} 2>&1"
