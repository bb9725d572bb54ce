rule pair_pages:
    """Find each page's counterpart (hreflang, language toggle, URL rewrites, content); split
    into shards."""
    input:
        pages="results/pages/{site}",
        static=content_input,
        code=code("pair", "clean/langid", "knn"),
    output:
        pairs=expand("results/pairs/{{site}}/{shard}.parquet", shard=SHARDS),
        stats="results/stats/pair_pages/{site}.json",
    log:
        "logs/pair_pages/{site}.log",
    benchmark:
        "benchmarks/pair_pages/{site}.tsv"
    conda:
        "../../envs/crawl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        site=site_json,
        shards=config["shards"],
        untranslated=json.dumps(config["clean"]["untranslated_pages"], sort_keys=True),
        content=content_args,
    shell:
        "parasim pair-pages --pages {input.pages} --site-json {params.site:q} --shards {params.shards}"
        " --untranslated-json {params.untranslated:q}"
        " {params.content}"
        " --out {output.pairs} --stats {output.stats} > {log} 2>&1"


rule pair_done:
    """Target for the pairing stage of one site: `snakemake results/pairs/<site>.done`."""
    input:
        shards=shard_files("pairs"),
        stats=done_stats("pair"),
        upstream=upstream_stats("pair"),
    output:
        "results/pairs/{site}.done",
    log:
        "logs/pair_done/{site}.log",
    conda:
        "../../envs/crawl.yaml"
    params:
        allow_empty=allow_empty_flag(),
    shell:
        "parasim summarize --stage pair --site {wildcards.site} --stats {input.stats}"
        " --upstream {input.upstream} --shards {input.shards} --out {output}"
        " {params.allow_empty} > {log} 2>&1"
