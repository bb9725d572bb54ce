rule align_lines:
    """Positive pairs: the paper's line-by-line check, DP realignment, and the review queue."""
    input:
        translated="results/translated/{site}/{shard}.parquet",
        code=code("align"),
    output:
        positives="results/positives/{site}/{shard}.parquet",
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
        "parasim align --input {input.translated} --output {output.positives}"
        " --settings-json {params.align:q} --stats {output.stats} > {log} 2>&1"


rule positives_done:
    """Target for the align stage of one site: `snakemake results/positives/<site>.done`."""
    input:
        shards=shard_files("positives"),
        stats=stats_files("align_lines"),
        upstream=upstream_stats("positives"),
    output:
        "results/positives/{site}.done",
    log:
        "logs/positives_done/{site}.log",
    conda:
        "../../envs/crawl.yaml"
    params:
        allow_empty=allow_empty_flag(),
    shell:
        "parasim summarize --stage positives --site {wildcards.site} --stats {input.stats}"
        " --upstream {input.upstream} --shards {input.shards} --out {output}"
        " {params.allow_empty} > {log} 2>&1"
