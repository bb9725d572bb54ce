# The table of every trained model of the run (issue 34): results/models/README.md.

#: Every trained model's metrics.json but the aligned encoder's (its folder is the rule's output).
MODEL_METRICS = [
    f"{RANKER_DIR}/metrics.json",
    f"{S3BERT_DIR}/metrics.json",
    *expand(
        f"{SIM_MODELS}/metrics.json", encoder=SIM_ENCODERS, partition=SIM_PARTITIONS
    ),
    f"{ENTITY_DIR}/metrics.json",
    f"{GRADED_DIR}/metrics.json",
]


rule models_table:
    """One table of every trained model of the run (issue 34): training data size, headline
    figure, untrained baseline, bootstrap 95 % interval of the difference, verdict. Printed in
    its log and at the end of the run; prunes the weight store the model folders share.
    """
    input:
        metrics=MODEL_METRICS,
        aligned=ALIGNED_DIR,
        code=code("train/core/verdict", "train/core/storage", "train/table"),
    output:
        md=report(
            "results/models/README.md",
            caption="../report/models_table.rst",
            category="Models",
        ),
        json="results/models/table.json",
    log:
        "logs/models_table.log",
    conda:
        "../../envs/nlp.yaml"
    shell:
        "parasim models-table --metrics {input.metrics} {input.aligned}/metrics.json --out {output.md} --json {output.json}"
        " --models-dir $(dirname {output.md}) > {log} 2>&1"
