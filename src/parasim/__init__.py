"""parasim: bilingual websites to a labelled multilingual semantic-similarity corpus."""

__version__ = "0.1.0"
