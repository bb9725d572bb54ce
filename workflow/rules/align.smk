#: The static encoder's build record, where the align stage embeds with it (align.encoder
#: e5-static, or auto: the build is cached, and skipped by auto on a CUDA machine at run time).
STATIC_ENCODER_INPUT = (
    ["results/models/static-encoder/build.json"]
    if config["align"]["scorer"] in ("embeddings", "both")
    and config["align"]["encoder"] in ("e5-static", "static", "auto")
    else []
)


rule static_encoder:
    """The static encoder (model2vec token vectors distilled from e5, issue 35): built once per
    align.static settings into the parasim cache; the JSON names the folder."""
    input:
        code=code("models/static"),
        extra=config["align"]["static"]["tune"]["extra"],  # a user's tuning pairs, if any
    output:
        "results/models/static-encoder/build.json",
    log:
        "logs/static_encoder.log",
    benchmark:
        "benchmarks/static_encoder.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=120,
    params:
        align=section_json("align"),
    shell:
        "parasim static-encoder --settings-json {params.align:q} --out {output} > {log} 2>&1"


rule align_lines:
    """Sentence pairs: the paper's line-by-line check, DP realignment, and the review queue."""
    input:
        translated="results/translated/{site}/{shard}.parquet",
        static=STATIC_ENCODER_INPUT,
        code=code("align"),
    output:
        aligned="results/aligned/{site}/{shard}.parquet",
        stats="results/stats/align_lines/{site}/{shard}.json",
    log:
        "logs/align_lines/{site}/{shard}.log",
    benchmark:
        "benchmarks/align_lines/{site}/{shard}.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=120,
    params:
        align=section_json("align"),
    shell:
        "parasim align-lines --input {input.translated} --output {output.aligned}"
        " --settings-json {params.align:q} --stats {output.stats} > {log} 2>&1"
