#: The static encoder's build record, where the mine stage embeds with it (mine.encoder e5-static).
MINE_STATIC_INPUT = (
    ["results/models/static-encoder/build.json"]
    if config["mine"]["encoder"] in ("e5-static", "static")
    else []
)


rule mine_divergences:
    """Natural divergences of one site (parasim.mine): for each positive, the site's
    other-language lines nearest its English side that the guards do not take for its
    translation; the corpus's `divergent` grade with the synthetic divergences."""
    input:
        positives=shard_files("positives"),
        static=MINE_STATIC_INPUT,
        code=code("mine", "knn"),
    output:
        mined="results/mined/{site}.parquet",
        stats="results/stats/mine_divergences/{site}.json",
    log:
        "logs/mine_divergences/{site}.log",
    benchmark:
        "benchmarks/mine_divergences/{site}.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        mine=section_json("mine"),
        align=section_json("align"),
    shell:
        "parasim mine-divergences --site {wildcards.site} --positives {input.positives}"
        " --out {output.mined} --settings-json {params.mine:q}"
        " --align-json {params.align:q} --stats {output.stats} > {log} 2>&1"
