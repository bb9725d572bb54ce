rule clean_positives:
    """Positives of a site: hard rules, language identification, deduplication (all shards)."""
    input:
        aligned=shard_files("aligned"),
        translated=shard_files("translated"),
        pairs=shard_files("pairs"),
        code=code("clean"),
    output:
        positives=expand("results/positives/{{site}}/{shard}.parquet", shard=SHARDS),
        dropped=expand("results/dropped/{{site}}/{shard}.parquet", shard=SHARDS),
        stats="results/stats/clean_positives/{site}.json",
    log:
        "logs/clean_positives/{site}.log",
    benchmark:
        "benchmarks/clean_positives/{site}.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        clean=section_json("clean"),
    shell:
        "parasim clean-positives --aligned {input.aligned} --translated {input.translated}"
        " --pairs {input.pairs}"
        " --out {output.positives} --dropped {output.dropped}"
        " --settings-json {params.clean:q} --stats {output.stats} > {log} 2>&1"


rule clean_done:
    """Target for the align and clean stages of one site: `snakemake results/positives/<site>.done`."""
    input:
        shards=shard_files("positives"),
        stats=done_stats("clean"),
        upstream=upstream_stats("clean"),
    output:
        "results/positives/{site}.done",
    log:
        "logs/clean_done/{site}.log",
    conda:
        "../../envs/crawl.yaml"
    params:
        allow_empty=allow_empty_flag(),
    shell:
        "parasim summarize --stage clean --site {wildcards.site}"
        " --stats {input.stats} --upstream {input.upstream}"
        " --shards {input.shards} --out {output} {params.allow_empty} > {log} 2>&1"
