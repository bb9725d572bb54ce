"""Seed 004 §3: the entity-enriched Siamese model, trained on parasim's corpus.

Two parts trained apart, as the seed does (its Figure 1; "the Siamese Transformer and the MLP
layer are trained separately and not jointly"):

1. **The Siamese bi-encoder** (``train.entity_siamese.model``, default the rebuilt multilingual
   e5, mean pooling): fine-tuned with the seed's regression objective (Sentence-BERT's cosine
   loss: the squared error between the cosine of the two sides' vectors and the label) on the
   corpus's training pairs, 1 = aligned translation, 0 = hard negative. ``max_steps: 0`` keeps
   the pretrained encoder.
2. **The MLP** (one hidden layer of ``hidden`` units, the seed's 32, ReLU, one sigmoid output) on
   the frozen encoder's cosine plus the four entity cosines of the scores stage (``ent_geo``,
   ``ent_org``, ``ent_date``, ``ent_qty``: seed 004 Algorithm 1 on the English side and the
   English translation of the other side) and an indicator of rows without entity scores (the
   scores stage skipped them: untranslated, too long; their cosines are filled with 1.0, the
   scores stage's value for two sides with no entity of a group). Binary cross-entropy, Adam at
   ``mlp_learning_rate`` (seed: 1e-3).

**BM25 silver pairs** (seed §3.2, ``silver: true``): within each training partition the English
side of every aligned training pair queries (``bm25s``) the English translations of the
partition's other sides; its ``silver_per_query`` best hits that are not its own partner and not
a training pair become new pairs, their entity cosines computed with spaCy NER
(:func:`parasim.amr.entities.entity_features`, the scores stage's groups and rule), labelled by
the trained model with its probability (soft labels: the seed's semi-supervised step). Then both
parts are trained again, from the pretrained encoder, on the gold and silver pairs together.

Evaluation (``results/eval/entity-siamese/``): ``test.json``, the corpus test split of the
training partitions (accuracy, F1, ROC AUC, overall and per language pair) of the entity model,
the plain Siamese model (the same trained encoder's cosine alone, threshold chosen on the
training pairs), the untrained encoder's cosine (same threshold rule), the majority class and
each entity cosine alone (AUC); ``sts.json``, STSb-multi-mt dev built cross-lingual (English
sentence 1 against the French / Spanish sentence 2; rows line up across the three files), the
Spearman of each model's score against the gold 0-5. The STS pairs' entity cosines come from the
English sentences 1 and 2 (the English original of the French / Spanish sentence stands in for
the scores stage's machine translation of the other side).

Bad input never crashes the workflow: no score shards, no entity column, or no entity score at
all (``scores.entities: false``), no training rows, or one class only give a skipped model whose
``metrics.json`` says why. Each trained part is kept with its fingerprint (``stages/``); a
running part resumes from its checkpoint, so a rerun after ``kill -9`` loses at most
``checkpoint_every`` steps.

Modules: :mod:`.settings` (``train.entity_siamese``), :mod:`.data` (corpus pairs joined to their
entity scores, BM25 silver pairs, the STS pairs), :mod:`.model` (the Siamese encoder, the MLP,
the model folder), :mod:`.evaluate` (the test and STS tables), :mod:`.training` (the run),
:mod:`.report` (the results table) and :mod:`.commands`.
"""
