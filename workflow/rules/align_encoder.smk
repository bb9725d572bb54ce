from parasim.flores import FOLDER as FLORES_DEVTEST

ALIGNED_DIR = "results/models/aligned-encoder"
#: Word pairs' links: "divergences" reads the divergences stage's seed links (one thread is
#: enough); "eflomal" aligns the two directions side by side (two threads).
WORDPAIR_LINKS = config["train"]["align_encoder"]["links"]
WORDPAIR_THREADS = 1 if WORDPAIR_LINKS == "divergences" else 2

#: Every site's positives shards and, with `train.align_encoder.links: divergences`, their
#: divergences shards in the same order.
WORDPAIR_INPUTS = {
    "positives": expand(
        "results/positives/{site}/{shard}.parquet", site=SITES, shard=SHARDS
    )
}
if WORDPAIR_LINKS == "divergences":
    WORDPAIR_INPUTS["divergences"] = expand(
        "results/divergences/{site}/{shard}.parquet", site=SITES, shard=SHARDS
    )
#: `--divergences D ...` when the rule reads the divergences' links, else nothing.
WORDPAIR_DIVERGENCE_ARGS = " ".join(
    ["--divergences", *WORDPAIR_INPUTS["divergences"]]
    if "divergences" in WORDPAIR_INPUTS
    else []
)
#: Flores-200 devtest: `train.flores`, or the project's real-data folder beside the checkout.
FLORES_DIR = config["train"]["flores"] or str(FLORES_DEVTEST)


rule align_encoder_wordpairs:
    """Word pairs of every site's positives (seed 003 §3.3): eflomal intersection links, one-to-one,
    exact matches removed; train / dev / test by page pair (test: the corpus test split). One
    word-pair shard per positives shard. The links: the divergences stage's (its seeds' eflomal
    intersection, read back; `train.align_encoder.links: divergences`) or a second eflomal run
    per language over all sites (`links: eflomal`)."""
    input:
        **WORDPAIR_INPUTS,
        code=code("train/core", "train/align_encoder", "divergences"),
    output:
        wordpairs=expand(
            "results/align_encoder/wordpairs/{site}/{shard}.parquet",
            site=SITES,
            shard=SHARDS,
        ),
        stats="results/align_encoder/wordpairs.stats.json",
    log:
        "logs/align_encoder_wordpairs.log",
    benchmark:
        "benchmarks/align_encoder_wordpairs.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: WORDPAIR_THREADS
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        train=section_json("train"),
        corpus=section_json("corpus"),
        divergences=WORDPAIR_DIVERGENCE_ARGS,
    shell:
        "parasim align-encoder-wordpairs --positives {input.positives} {params.divergences}"
        " --out {output.wordpairs} --corpus-json {params.corpus:q}"
        " --settings-json {params.train:q}"
        " --stats {output.stats} > {log} 2>&1"


rule train_align_encoder:
    """Contextual alignment of the encoder (seed 003 §3.3) on the train word pairs.

    The output folder is a `save_pretrained` encoder other rules can name as their encoder
    (`align.encoder`, `train.divergence_ranker.model`). Checkpoints live in ALIGNED_DIR.work (a
    rerun after a crash resumes from the last). Not in `rule all`: `snakemake
    results/models/aligned-encoder`.
    """
    input:
        wordpairs=rules.align_encoder_wordpairs.output.wordpairs,
        code=code("train/core", "train/align_encoder", "train/eval/cwr"),
    output:
        model=directory(ALIGNED_DIR),
    log:
        "logs/train_align_encoder.log",
    benchmark:
        "benchmarks/train_align_encoder.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=120,
        gpu=1,  # CUDA + bf16 autocast when present; runs on the CPU without one
    params:
        train=section_json("train"),
    shell:
        "parasim train-align-encoder --wordpairs {input.wordpairs}"
        " --settings-json {params.train:q} --out {output.model} > {log} 2>&1"


rule eval_align_encoder:
    """Contextual word retrieval (seed 003 §3.2) of the base and the aligned encoder, and the
    rotation baseline, on Flores-200 EN-FR / EN-ES and the word pairs' test slice.

    Not in `rule all` (Flores lives outside the project): `snakemake
    results/eval/aligned-encoder/cwr.json`.
    """
    input:
        model=ALIGNED_DIR,
        wordpairs=rules.align_encoder_wordpairs.output.wordpairs,
        flores=FLORES_DIR,
        code=code("train/core", "train/align_encoder", "train/eval/cwr"),
    output:
        "results/eval/aligned-encoder/cwr.json",
    log:
        "logs/eval_align_encoder.log",
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
        gpu=1,
    params:
        base=config["train"]["align_encoder"]["model"],
    shell:
        "parasim eval-align-encoder --wordpairs {input.wordpairs} --encoders {params.base} {input.model}"
        " --flores {input.flores} --out {output} > {log} 2>&1"
