rule translate_lines:
    """Translate the other-language side of each page pair to English, line by line (cached)."""
    input:
        lines="results/lines/{site}/{shard}.parquet",
        code=code("translate"),
    output:
        translated="results/translated/{site}/{shard}.parquet",
        stats="results/stats/translate_lines/{site}/{shard}.json",
    log:
        "logs/translate_lines/{site}/{shard}.log",
    benchmark:
        "benchmarks/translate_lines/{site}/{shard}.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=3000,
        runtime=120,
    params:
        translate=section_json("translate"),
    shell:
        "parasim translate-lines --input {input.lines} --output {output.translated}"
        " --settings-json {params.translate:q} --threads {threads}"
        " --stats {output.stats} > {log} 2>&1"


rule translate_done:
    """Target for the translate stage of one site: `snakemake results/translated/<site>.done`."""
    input:
        shards=shard_files("translated"),
        stats=done_stats("translate"),
        upstream=upstream_stats("translate"),
    output:
        "results/translated/{site}.done",
    log:
        "logs/translate_done/{site}.log",
    conda:
        "../../envs/crawl.yaml"
    params:
        allow_empty=allow_empty_flag(),
    shell:
        "parasim summarize --stage translate --site {wildcards.site} --stats {input.stats}"
        " --upstream {input.upstream} --shards {input.shards} --out {output}"
        " {params.allow_empty} > {log} 2>&1"
