rule parse_pages:
    """HTML of each page pair to lines (inscriptis), one shard at a time."""
    input:
        pairs="results/pairs/{site}/{shard}.parquet",
        pages="results/pages/{site}",
        code=code("parse"),
    output:
        lines="results/lines/{site}/{shard}.parquet",
        stats="results/stats/parse_pages/{site}/{shard}.json",
    log:
        "logs/parse_pages/{site}/{shard}.log",
    benchmark:
        "benchmarks/parse_pages/{site}/{shard}.tsv"
    conda:
        "../../envs/crawl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        site=site_json,
        parse=section_json("parse"),
    shell:
        "parasim parse-pages --pairs {input.pairs} --pages {input.pages} --site-json {params.site:q}"
        " --settings-json {params.parse:q} --out {output.lines} --stats {output.stats} > {log} 2>&1"


rule parse_done:
    """Target for the parse stage of one site: `snakemake results/lines/<site>.done`."""
    input:
        shards=shard_files("lines"),
        stats=done_stats("parse"),
        upstream=upstream_stats("parse"),
    output:
        "results/lines/{site}.done",
    log:
        "logs/parse_done/{site}.log",
    conda:
        "../../envs/crawl.yaml"
    params:
        allow_empty=allow_empty_flag(),
    shell:
        "parasim summarize --stage parse --site {wildcards.site} --stats {input.stats}"
        " --upstream {input.upstream} --shards {input.shards} --out {output}"
        " {params.allow_empty} > {log} 2>&1"
