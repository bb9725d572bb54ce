rule align_lines:
    """Sentence pairs: the paper's line-by-line check, DP realignment, and the review queue."""
    input:
        translated="results/translated/{site}/{shard}.parquet",
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
