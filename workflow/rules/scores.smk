#: The tables `scores.inputs` names for one shard (positives are always read).
SCORE_INPUTS = {"positives": "results/positives/{site}/{shard}.parquet"}
if "negatives" in config["scores"]["inputs"]:
    SCORE_INPUTS["negatives"] = "results/negatives/negatives.parquet"
if "divergences" in config["scores"]["inputs"]:
    SCORE_INPUTS["divergences"] = "results/divergences/{site}/{shard}.parquet"
#: The amrlib parser runs a neural model (CUDA when present); the rules parser is CPU only.
SCORES_GPU = 1 if config["scores"]["amr"]["parser"] == "amrlib" else 0
#: The divergences' stats explain empty scores too when the scores read the divergences.
SCORES_ALSO_UPSTREAM = [n for n in ["divergences"] if n in config["scores"]["inputs"]]


rule score_pairs:
    """AMR graphs, the 15 aspects, entity, BM25, chrF/BLEU and embedding scores of one shard."""
    input:
        **SCORE_INPUTS,
        code=code("scores", "amr"),
    output:
        scores="results/scores/{site}/{shard}.parquet",
        stats="results/stats/score_pairs/{site}/{shard}.json",
    log:
        "logs/score_pairs/{site}/{shard}.log",
    benchmark:
        "benchmarks/score_pairs/{site}/{shard}.tsv"
    conda:
        "../../envs/nlp.yaml"
    threads: 2
    resources:
        # the parse, the aspect workers and the embedding's 2 workers at once: 3.75 GB PSS at
        # most on a WET shard (BENCHMARKS.md, issue 13)
        mem_mb=5000,
        runtime=120,
        gpu=SCORES_GPU,  # 1 only for scores.amr.parser: amrlib
    params:
        scores=section_json("scores"),
        translate=section_json("translate"),
        # `--positives P --negatives N --divergences D`, for the inputs the rule has
        inputs=lambda wildcards, input: " ".join(
            f"--{k} {input[k]}" for k in SCORE_INPUTS
        ),
        parse_cache="results/cache/amr.sqlite",
        vector_cache="results/cache/amr_vectors.sqlite",
        sentence_cache="results/cache/sentence_vectors.sqlite",
    shell:
        "parasim score-pairs {params.inputs} --output {output.scores}"
        " --settings-json {params.scores:q} --translate-json {params.translate:q}"
        " --parse-cache {params.parse_cache}"
        " --vector-cache {params.vector_cache} --sentence-cache {params.sentence_cache}"
        " --threads {threads} --stats {output.stats} > {log} 2>&1"


rule scores_done:
    """Target for the scores of one site: `snakemake results/scores/<site>.done`.

    Also draws the score distributions per label and divergence type (the stage's `.done` extra
    `png`, parasim.scores.plot.plot_site).
    """
    input:
        shards=shard_files("scores"),
        stats=done_stats("scores"),
        upstream=upstream_stats("scores", also=SCORES_ALSO_UPSTREAM),
    output:
        done="results/scores/{site}.done",
        png=report(
            "results/scores/{site}/distributions.png",
            caption="../report/scores.rst",
            category="Scores",
            subcategory="{site}",
        ),
    log:
        "logs/scores_done/{site}.log",
    conda:
        "../../envs/nlp.yaml"
    params:
        allow_empty=allow_empty_flag(),
    shell:
        "parasim summarize --stage scores --site {wildcards.site} --shards {input.shards}"
        " --stats {input.stats} --upstream {input.upstream} --out {output.done}"
        " --extra png={output.png} {params.allow_empty} > {log} 2>&1"
