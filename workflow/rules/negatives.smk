rule fit_topics_partition:
    """LDA topics of one partition (the most coherent count kept): one job per partition, side
    by side on a cluster. The partitions come from the config (each site's `en-<lang>` pairs and
    domain, `corpus.partitions`; parasim.partition.site_partitions), so the DAG is known before
    any positive exists, without a checkpoint; the job reads only its sites' positives.
    """
    input:
        positives=partition_positives,
        code=code("negatives", "partition"),
    output:
        topics=directory("results/topics/{partition}"),
    log:
        "logs/fit_topics/{partition}.log",
    benchmark:
        "benchmarks/fit_topics/{partition}.tsv"
    wildcard_constraints:
        partition=PARTITION_RE,
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=240,
    params:
        negatives=section_json("negatives"),
        corpus=section_json("corpus"),
    shell:
        "parasim fit-topics-partition --partition {wildcards.partition:q}"
        " --positives {input.positives} --out results/topics"
        " --negatives-json {params.negatives:q} --corpus-json {params.corpus:q}"
        " --threads {threads} > {log} 2>&1"


rule fit_topics:
    """The partitions' topics gathered: `results/topics/doc_topics.parquet` and `topics.json`
    (the same files as one job over all partitions, `parasim fit-topics --positives`).
    """
    input:
        partitions=expand("results/topics/{partition}", partition=PARTITIONS),
        code=code("negatives", "partition"),
    output:
        doc_topics="results/topics/doc_topics.parquet",
        summary="results/topics/topics.json",
        stats="results/stats/fit_topics.json",
    log:
        "logs/fit_topics.log",
    benchmark:
        "benchmarks/fit_topics.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        negatives=section_json("negatives"),
        corpus=section_json("corpus"),
        partitions=" ".join(f"'{p}'" for p in PARTITIONS),
    shell:
        "parasim fit-topics --from-partitions {params.partitions} --out results/topics"
        " --negatives-json {params.negatives:q} --corpus-json {params.corpus:q}"
        " --stats {output.stats} > {log} 2>&1"


rule select_negatives_partition:
    """Hard negatives (Algorithm 1) of one partition: sentence vectors of its sites' positives,
    its cosine band, guards. One job per partition (the partitions: see fit_topics_partition);
    it waits for its own partition's topics only."""
    input:
        positives=partition_positives,
        topics="results/topics/{partition}",
        code=code("negatives", "partition"),
    output:
        part="results/negatives/parts/{partition}.parquet",
    log:
        "logs/select_negatives/{partition}.log",
    benchmark:
        "benchmarks/select_negatives/{partition}.tsv"
    wildcard_constraints:
        partition=PARTITION_RE,
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=240,
        gpu=1,  # SmolLM2 vectors on CUDA when present; runs on the CPU without one
    params:
        negatives=section_json("negatives"),
        corpus=section_json("corpus"),
        cache="results/cache/vectors",
    shell:
        "parasim select-negatives-partition --partition {wildcards.partition:q}"
        " --positives {input.positives} --topics results/topics --out {output.part}"
        " --cache-dir {params.cache}"
        " --negatives-json {params.negatives:q} --corpus-json {params.corpus:q}"
        " --threads {threads} > {log} 2>&1"


rule select_negatives:
    """The partitions' negatives gathered in one file, sorted by id, with the encoder and bands
    (the same file as one job over all partitions, `parasim select-negatives --positives`).
    """
    input:
        parts=expand(
            "results/negatives/parts/{partition}.parquet", partition=PARTITIONS
        ),
        code=code("negatives", "partition"),
    output:
        negatives="results/negatives/negatives.parquet",
        stats="results/stats/select_negatives.json",
    log:
        "logs/select_negatives.log",
    benchmark:
        "benchmarks/select_negatives.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        negatives=section_json("negatives"),
        corpus=section_json("corpus"),
        partitions=" ".join(f"'{p}'" for p in PARTITIONS),
    shell:
        "parasim select-negatives --from-partitions {params.partitions}"
        " --parts results/negatives/parts --out {output.negatives}"
        " --negatives-json {params.negatives:q} --corpus-json {params.corpus:q}"
        " --stats {output.stats} > {log} 2>&1"


#: The divergent grade's inputs (corpus.divergent): the synthetic divergences of every shard and
#: the mined divergences of every site.
CORPUS_DIVERGENT = {
    "divergences": (
        expand("results/divergences/{site}/{shard}.parquet", site=SITES, shard=SHARDS)
        if config["corpus"]["divergent"]["synthetic"]
        else []
    ),
    "mined": (
        expand("results/mined/{site}.parquet", site=SITES)
        if config["corpus"]["divergent"]["mined"]
        else []
    ),
}


rule build_corpus:
    """The labelled corpus: three grades (equivalent, divergent, unrelated), grouped splits and
    folds, balanced shards, dataset card with each grade's hardness for the untrained encoder.
    """
    input:
        **CORPUS_DIVERGENT,
        positives=expand(
            "results/positives/{site}/{shard}.parquet", site=SITES, shard=SHARDS
        ),
        negatives="results/negatives/negatives.parquet",
        topics="results/topics/topics.json",
        clean=expand("results/stats/clean_positives/{site}.json", site=SITES),
        code=code("corpus", "negatives", "partition", "mine"),
    output:
        corpus=directory("results/corpus"),
        stats="results/stats/build_corpus.json",
    log:
        "logs/build_corpus.log",
    benchmark:
        "benchmarks/build_corpus.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        negatives=section_json("negatives"),
        corpus=section_json("corpus"),
        allow_empty=allow_empty_flag(),
    shell:
        "parasim build-corpus --positives {input.positives} --negatives {input.negatives}"
        " --topics results/topics --clean-stats {input.clean} --out {output.corpus}"
        " --divergences {input.divergences} --mined {input.mined}"
        " --negatives-json {params.negatives:q} --corpus-json {params.corpus:q}"
        " --stats {output.stats} {params.allow_empty} > {log} 2>&1"
