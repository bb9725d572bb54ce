rule make_divergences:
    """Synthetic divergences of one positives shard: ranking groups with EQ/DIV token tags."""
    input:
        positives="results/positives/{site}/{shard}.parquet",
        code=code("divergences"),
    output:
        divergences="results/divergences/{site}/{shard}.parquet",
        stats="results/stats/make_divergences/{site}/{shard}.json",
    log:
        "logs/make_divergences/{site}/{shard}.log",
    benchmark:
        "benchmarks/make_divergences/{site}/{shard}.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=1,  # LM ranking on CUDA when present; runs on the CPU without one
    params:
        divergences=section_json("divergences"),
    shell:
        "parasim make-divergences --input {input.positives} --output {output.divergences}"
        " --settings-json {params.divergences:q} --stats {output.stats} > {log} 2>&1"


rule divergences_done:
    """Target for the divergences of one site: `snakemake results/divergences/<site>.done`.

    Also writes the site's dataset card (counts per type summed over shards, validity shares:
    the stage's `.done` extra `card`, parasim.divergences.stage.write_site_card).
    """
    input:
        shards=shard_files("divergences"),
        stats=done_stats("divergences"),
        upstream=upstream_stats("divergences"),
    output:
        done="results/divergences/{site}.done",
        card="results/divergences/{site}/README.md",
    log:
        "logs/divergences_done/{site}.log",
    conda:
        "../../envs/nlp.yaml"
    params:
        allow_empty=allow_empty_flag(),
    shell:
        "parasim summarize --stage divergences --site {wildcards.site} --shards {input.shards}"
        " --stats {input.stats} --upstream {input.upstream} --out {output.done}"
        " --extra card={output.card} {params.allow_empty} > {log} 2>&1"
