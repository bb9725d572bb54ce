"""The ``rules`` parser: spaCy dependency parses and named entities to AMR-style graphs.

Deterministic and offline. Each spaCy token that carries meaning becomes a node; its dependency
label gives the role of the edge from its nearest head that is a node:

- Predicates are frames: a verb ``see`` is ``see-01``; ``have`` is ``have-03``. Subjects are
  ``:ARG0`` (``:ARG1`` for a short list of unaccusative verbs), objects ``:ARG1``, datives and
  ``to``-phrases of transfer verbs ``:ARG2``; a passive subject is ``:ARG1`` and the ``by``-agent
  ``:ARG0``. Clausal complements are ``:ARG1``; a complement without a subject (``want to go``)
  shares its head's subject (a reentrancy), as do coordinated verbs.
- A copula makes its complement the head: ``X is happy`` is ``(h / happy :domain X)``; ``X is in
  Y`` is ``be-located-at-91``.
- Modals wrap their verb: ``can go`` is ``(p / possible-01 :ARG1 (g / go-01))``; ``must``
  is ``obligate-01``, ``should`` ``recommend-01``.
- ``not``, ``n't``, ``never`` and ``no`` give ``:polarity -`` (on the modal when there is one).
- Named entities are ``(x / <type> :name (n / name :op1 "..." ...))`` with spaCy labels mapped to
  AMR types; dates are ``date-entity`` with ``:year``/``:month``/``:day``, amounts
  ``monetary-quantity``, ``percentage-entity``, ``ordinal-entity`` and ``*-quantity``. Numbers
  are ``:quant`` constants; quantifiers (``many``, ``some``) ``:quant``.
- Modifiers: adjectives and compounds ``:mod``, ``-ly`` adverbs ``:manner``, prepositions by
  their meaning (``in`` ``:location``, ``for`` ``:purpose`` or ``:beneficiary``, ``about``
  ``:topic``, ...), subordinate clauses by their conjunction (``because`` ``:cause``, ``if``
  ``:condition``, ``when`` ``:time``), possessives ``:poss``.
- Coordination is ``(a / and :op1 ... :op2 ...)`` (``or``; ``but`` is ``contrast-01``).
- Reentrancies: a pronoun repeated in a sentence (``I`` ... ``my``), a repeated name, a
  definite repeated noun, and the head noun of a relative clause (``the man who saw me``: the man
  is ``:ARG0`` of ``see-01``) are one node.
- Imperatives get ``:mode imperative`` and ``:ARG0 (y / you)``; questions ``:mode
  interrogative`` or an ``amr-unknown`` in place of the wh-word. Several sentences in one text
  are the ``:snt1``, ``:snt2`` ... of a ``multi-sentence``.

:data:`RULES_VERSION` changes whenever the output for some sentence changes (it is part of the
parse cache's key).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

#: Bumped whenever the converter's output changes: cached parses of older versions are not used.
RULES_VERSION = "6"

Const = str


@dataclass
class _Node:
    concept: str
    edges: list[tuple[str, int]] = field(default_factory=list)
    attrs: list[tuple[str, str]] = field(default_factory=list)


# --------------------------------------------------------------------------- lexicon

NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "thousand": 1000,
    "million": 1_000_000,
    "billion": 1_000_000_000,
    "dozen": 12,
}
ORDINAL_WORDS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "last": -1,
}
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
)
MONTHS = {m: i + 1 for i, m in enumerate(_MONTH_NAMES.split())}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
TIME_UNITS = {
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "year",
    "decade",
    "century",
}
QUANTITY_UNITS = {
    "distance-quantity": {"mile", "kilometer", "km", "meter", "metre", "m", "foot", "feet", "inch"},
    "mass-quantity": {"gram", "kilogram", "kg", "g", "pound", "lb", "ton", "tonne", "ounce"},
    "volume-quantity": {"liter", "litre", "gallon", "l", "ml"},
    "temporal-quantity": TIME_UNITS,
}
CURRENCIES = {
    "$": "dollar",
    "dollar": "dollar",
    "usd": "dollar",
    "€": "euro",
    "euro": "euro",
    "eur": "euro",
    "£": "pound",
    "pound": "pound",
    "franc": "franc",
    "yen": "yen",
    "cent": "cent",
}
_COUNTRY_NAMES = """
afghanistan albania algeria argentina australia austria belgium bolivia brazil bulgaria canada
chile china colombia croatia cuba denmark egypt england estonia ethiopia finland france germany
greece hungary iceland india indonesia iran iraq ireland israel italy japan kenya korea latvia
lebanon lithuania luxembourg mexico morocco netherlands nigeria norway pakistan peru poland
portugal romania russia scotland serbia spain sweden switzerland syria turkey ukraine uruguay
venezuela vietnam wales britain america us usa uk
"""
COUNTRIES = set(_COUNTRY_NAMES.split())
GOVERNMENT_WORDS = re.compile(
    r"\b(ministry|department|government|agency|council|parliament|senate|commission|bureau"
    r"|congress|office|service|administration|authority|secretariat)\b",
    re.I,
)

#: spaCy entity labels -> AMR entity types (GPE and ORG are refined in _entity_type).
NE_TYPES = {
    "PERSON": "person",
    "GPE": "city",
    "LOC": "location",
    "ORG": "organization",
    "NORP": "nationality",
    "FAC": "facility",
    "EVENT": "event",
    "PRODUCT": "product",
    "WORK_OF_ART": "work-of-art",
    "LAW": "law",
    "LANGUAGE": "language",
}

PRONOUNS = {
    "i": "i",
    "me": "i",
    "my": "i",
    "mine": "i",
    "myself": "i",
    "you": "you",
    "your": "you",
    "yours": "you",
    "yourself": "you",
    "yourselves": "you",
    "he": "he",
    "him": "he",
    "his": "he",
    "himself": "he",
    "she": "she",
    "her": "she",
    "hers": "she",
    "herself": "she",
    "it": "it",
    "its": "it",
    "itself": "it",
    "we": "we",
    "us": "we",
    "our": "we",
    "ours": "we",
    "ourselves": "we",
    "they": "they",
    "them": "they",
    "their": "they",
    "theirs": "they",
    "themselves": "they",
}
RELATIVE = {"who", "whom", "which", "that", "whose"}
WH_ROLES = {"where": ":location", "when": ":time", "why": ":cause", "how": ":manner"}
NEGATORS = {"not", "n't", "never", "no", "nt"}
MODALS = {
    "can": "possible-01",
    "could": "possible-01",
    "may": "possible-01",
    "might": "possible-01",
    "must": "obligate-01",
    "should": "recommend-01",
    "ought": "recommend-01",
}
QUANTIFIERS = {"many", "much", "few", "several", "some", "more", "most", "less", "little", "lot"}
MOD_DETERMINERS = {"all", "every", "each", "any", "both", "another", "other", "such", "this"}
TIME_ADVERBS = {
    "now",
    "then",
    "today",
    "yesterday",
    "tomorrow",
    "soon",
    "already",
    "always",
    "often",
    "once",
    "ever",
    "sometimes",
    "later",
    "before",
    "after",
    "recently",
    "still",
    "yet",
    "again",
    "tonight",
}
DEGREE_ADVERBS = {"very", "so", "too", "quite", "rather", "extremely", "really", "most", "more"}
UNACCUSATIVE = {
    "arrive",
    "come",
    "go",
    "die",
    "fall",
    "happen",
    "appear",
    "disappear",
    "grow",
    "become",
    "remain",
    "seem",
    "exist",
    "begin",
    "start",
    "change",
    "break",
    "rise",
    "sink",
    "stay",
    "occur",
    "return",
    "leave",
    "sit",
    "lie",
    "belong",
    "look",
}
TRANSFER_VERBS = {"give", "tell", "show", "send", "say", "explain", "offer", "lend", "sell"}
MARKER_ROLES = {
    "because": ":cause",
    "since": ":cause",
    "as": ":time",
    "if": ":condition",
    "unless": ":condition",
    "when": ":time",
    "while": ":time",
    "whenever": ":time",
    "before": ":time",
    "after": ":time",
    "until": ":time",
    "once": ":time",
    "although": ":concession",
    "though": ":concession",
    "so": ":purpose",
    "to": ":purpose",
}
PREP_ROLES = {
    "in": ":location",
    "on": ":location",
    "at": ":location",
    "inside": ":location",
    "under": ":location",
    "near": ":location",
    "above": ":location",
    "below": ":location",
    "behind": ":location",
    "beside": ":location",
    "between": ":location",
    "among": ":location",
    "across": ":location",
    "around": ":location",
    "over": ":location",
    "into": ":destination",
    "onto": ":destination",
    "toward": ":direction",
    "towards": ":direction",
    "through": ":path",
    "along": ":path",
    "from": ":source",
    "out": ":source",
    "about": ":topic",
    "during": ":time",
    "since": ":time",
    "until": ":time",
    "till": ":time",
    "before": ":time",
    "after": ":time",
    "of": ":ARG1",
    "with": ":instrument",
    "without": ":manner",
    "like": ":resemble",
    "as": ":manner",
    "by": ":manner",
    "than": ":compared-to",
    "despite": ":concession",
    "because": ":cause",
    "for": ":purpose",
    "to": ":ARG2",
}
TIME_NOUNS = TIME_UNITS | {"night", "morning", "evening", "afternoon", "moment", "time", "sunset"}
PERSONISH = {"PRON", "PROPN"}
#: Nouns in -er / -or that are no agents of a verb.
NOT_AGENTIVE = {
    "water",
    "paper",
    "number",
    "other",
    "order",
    "power",
    "matter",
    "flower",
    "corner",
    "letter",
    "answer",
    "center",
    "color",
    "colour",
    "floor",
    "door",
    "mirror",
    "winter",
    "summer",
    "danger",
    "dinner",
    "finger",
    "hunger",
    "anger",
    "wonder",
    "favor",
    "favour",
    "error",
    "honor",
    "honour",
    "humor",
    "mother",
    "father",
    "brother",
    "sister",
    "daughter",
    "monster",
    "shower",
    "tower",
    "layer",
    "river",
    "silver",
    "manner",
    "cover",
    "butter",
    "meter",
    "chapter",
    "planter",
    "weather",
    "feather",
}
#: Nouns that AMR writes with another concept.
NOUN_CONCEPTS = {"people": "person", "everybody": "everyone", "somebody": "someone"}
FRAME_LIKE = re.compile(r"^.+-\d\d$")
#: Roles that AMR writes as a frame: role -> (frame, role of the dependent, role of the head,
#: whether the frame takes the head's place in the graph).
ROLE_FRAMES = {
    ":cause": ("cause-01", ":ARG0", ":ARG1", True),
    ":resemble": ("resemble-01", ":ARG2", ":ARG1", False),
}


@lru_cache(maxsize=1)
def frame_table() -> dict[str, frozenset[str]]:
    """AMR frames and their numbered roles (``arrive-01`` -> ``{"ARG1", "ARG2", ...}``).

    Read from the frame list that smatchpp ships (PropBank frames with AMR's additions); empty
    when the file is not there, and the parser then falls back to ``lemma-01`` and fixed lists.
    """
    try:
        from importlib.resources import files

        path = files("smatchpp.formalism.amr") / "resource" / "propbank-amr-frames-arg-descr.txt"
        lines = path.read_text(encoding="utf-8").splitlines()
    except (ImportError, OSError):
        return {}
    table = {}
    for line in lines:
        m = re.match(r"^([a-z][a-z-]*?-\d\d)\s", line)
        if m:
            table[m.group(1)] = frozenset(re.findall(r"\b(ARG\d)\b", line))
    return table


@lru_cache(maxsize=1)
def frame_senses() -> dict[str, str]:
    """Lemma -> its lowest-numbered frame (``good`` -> ``good-02``), from :func:`frame_table`."""
    best: dict[str, str] = {}
    for frame in sorted(frame_table()):
        best.setdefault(frame[:-3], frame)
    return best


def _number(text: str) -> str | None:
    """A number in digits and/or words as a constant (``"3"``, ``"5000000"``), or None."""
    t = text.lower().replace(",", "").strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", t):
        return t
    total, current, found = 0.0, 0.0, False
    for word in re.split(r"[\s-]+", t):
        if word == "and" or not word:
            continue
        if re.fullmatch(r"\d+(\.\d+)?", word):
            value, found = float(word), True
            current += value
            continue
        if word not in NUMBER_WORDS:
            return None
        value, found = NUMBER_WORDS[word], True
        if value == 100:
            current = max(current, 1) * 100
        elif value >= 1000:
            total += max(current, 1) * value
            current = 0
        else:
            current += value
    value = total + current
    return (str(int(value)) if value == int(value) else str(value)) if found else None


def _ordinal(text: str) -> str | None:
    t = text.lower().strip()
    if t in ORDINAL_WORDS:
        return str(ORDINAL_WORDS[t])
    m = re.fullmatch(r"(\d+)(st|nd|rd|th)", t)
    return m.group(1) if m else None


def _adverb_concept(lemma: str) -> str:
    if lemma.endswith("ily") and len(lemma) > 4:
        return lemma[:-3] + "y"
    if lemma.endswith("ly") and len(lemma) > 4:
        return lemma[:-2]
    return lemma


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "").replace('"', "") + '"'


# --------------------------------------------------------------------------- the converter


class _Converter:
    """Builds one graph from one spaCy ``Doc``."""

    def __init__(self, doc) -> None:
        self.doc = doc
        self.nodes: list[_Node] = []
        self.tok: dict[int, int] = {}  # token index -> node
        self.wrapper: dict[int, int] = {}  # node -> modal node that stands for it above
        self.shared: dict[str, int] = {}  # coreference key -> node
        self.skip: set[int] = set()
        self.merged: set[int] = set()  # copula complements merged into their copula's node
        self.conjuncts: dict[int, int] = {}  # coordination node -> conjuncts so far
        self.ents: dict[int, object] = {}  # token index -> its entity span
        for ent in doc.ents:
            for i in range(ent.start, ent.end):
                self.ents[i] = ent

    # -- nodes and edges
    def new(self, concept: str) -> int:
        self.nodes.append(_Node(concept))
        return len(self.nodes) - 1

    def shared_node(self, key: str, concept: str) -> int:
        if key not in self.shared:
            self.shared[key] = self.new(concept)
        return self.shared[key]

    def rel(self, src: int, role: str, tgt: int) -> None:
        if src != tgt and (role, tgt) not in self.nodes[src].edges:
            self.nodes[src].edges.append((role, tgt))

    def attr(self, src: int, role: str, value: str) -> None:
        if (role, value) not in self.nodes[src].attrs:
            self.nodes[src].attrs.append((role, value))

    def outer(self, node: int) -> int:
        """The node that stands for ``node`` towards its head (a modal wrapping it)."""
        return self.wrapper.get(node, node)

    # -- pass 1: which token is which node
    def build(self) -> tuple[list[_Node], int]:
        doc = self.doc
        for ent in doc.ents:
            self.entity(ent)
        for t in doc:
            if t.i not in self.tok and t.i not in self.skip:
                self.token_node(t)
        for t in doc:
            self.attach(t)
        for t in doc:
            if t.i in self.tok and t.pos_ in ("VERB", "AUX"):
                self.share_subject(t)
        self.existentials()
        roots = []
        for sent in doc.sents:
            r = self.sentence_root(sent)
            if r is not None:
                roots.append(r)
        if not roots:
            return self.nodes, self.fallback()
        if len(roots) == 1:
            return self.nodes, roots[0]
        top = self.new("multi-sentence")
        for k, r in enumerate(roots, 1):
            self.rel(top, f":snt{k}", r)
        return self.nodes, top

    def fallback(self) -> int:
        """A text without a content node (``No!``, a number): its first word, or -1."""
        words = [t for t in self.doc if not t.is_punct and not t.is_space]
        if not words:
            return -1
        value = _number(" ".join(t.text for t in words if t.like_num or t.lower_ in NUMBER_WORDS))
        if value is not None and all(t.like_num or t.lower_ in NUMBER_WORDS for t in words):
            node = self.new("number")
            self.attr(node, ":value", value)
            return node
        low = words[0].lower_
        if low in ("no", "not", "never"):
            node = self.new("no")
            self.attr(node, ":polarity", "-")
            return node
        return self.new(words[0].lemma_.lower() or low)

    def existentials(self) -> None:
        """A copula left without a complement: ``be-located-at-91`` when it has a location;
        else its first other dependent (``the thorns are of no use``: use) or its subject takes
        its place, keeping the subject as ``:domain``."""
        for k, n in enumerate(self.nodes):
            if n.concept != "be":
                continue
            roles = {r for r, _ in n.edges}
            if ":location" in roles:
                n.concept = "be-located-at-91"
                swap = {":domain": ":ARG1", ":location": ":ARG2"}
                n.edges = [(swap.get(r, r), x) for r, x in n.edges]
                continue
            others = [x for r, x in n.edges if r != ":domain"]
            subjects = [x for r, x in n.edges if r == ":domain"]
            if not others and not subjects:
                n.concept = "exist-01"
                continue
            new = others[0] if others else subjects[0]
            self.nodes[new].edges += [(r, x) for r, x in n.edges if x != new]
            self.nodes[new].attrs += n.attrs
            self.nodes[k] = _Node("__merged__")
            self.redirect(k, new)
            for t, v in self.tok.items():
                if v == k:
                    self.tok[t] = new

    def token_node(self, t) -> None:
        lemma = t.lemma_.lower()
        low = t.text.lower()
        dep = t.dep_
        if t.pos_ in ("PUNCT", "SPACE", "SYM", "X") or dep in ("punct", "case", "expl", "prt"):
            return
        if (low in NEGATORS or dep == "neg") and t.pos_ != "PRON":
            return
        if dep in ("cc", "mark", "preconj") or (t.pos_ == "CCONJ" and dep != "ROOT"):
            return
        if t.pos_ == "ADP" and dep not in ("ROOT",):
            return
        if t.pos_ == "PART" and low == "to":
            return
        if dep in ("aux", "auxpass") and lemma not in MODALS:
            return
        if t.pos_ == "DET" and low not in QUANTIFIERS | MOD_DETERMINERS:
            return
        if low in RELATIVE and dep in ("nsubj", "nsubjpass", "dobj", "pobj", "poss"):
            head = self.relative_head(t)
            if head is not None:
                self.tok[t.i] = head
                return
        if dep in ("aux",) and lemma in MODALS:
            self.tok[t.i] = self.new(MODALS[lemma])
            return
        if (
            low == "it"
            and dep == "nsubj"
            and any(c.dep_ in ("ccomp", "xcomp") for c in t.head.children)
        ):
            return  # extraposition: "it is important to ..." has no "it" in AMR
        if t.pos_ == "PRON" or low in PRONOUNS:
            if low in WH_ROLES or low in ("what", "who", "whom", "which"):
                self.tok[t.i] = self.new("amr-unknown")
            else:
                concept = PRONOUNS.get(low, lemma)
                self.tok[t.i] = self.shared_node(f"pron:{concept}", concept)
            return
        if low in WH_ROLES and t.tag_ == "WRB":
            if dep == "advmod" and self.is_question():
                self.tok[t.i] = self.new("amr-unknown")
            return
        if t.pos_ == "NUM" or t.like_num:
            return  # a constant: attached in attach()
        if t.pos_ in ("VERB",) or (t.pos_ == "AUX" and dep in ("ROOT", "conj", "ccomp", "advcl")):
            self.tok[t.i] = self.new(self.verb_concept(t))
            return
        if t.pos_ == "ADV":
            if t.i > 0 and dep == "advmod" and lemma in ("ago",):
                self.tok[t.i] = self.new("before")
                return
            self.tok[t.i] = self.new(_adverb_concept(lemma))
            return
        if t.pos_ == "ADJ":
            concept = frame_senses().get(lemma, lemma)
            self.tok[t.i] = self.new(concept)
            if t.tag_ in ("JJR", "JJS"):
                self.rel(self.tok[t.i], ":degree", self.new("more" if t.tag_ == "JJR" else "most"))
            return
        definite = any(c.dep_ == "det" and c.lower_ == "the" for c in t.children)
        if t.pos_ in ("NOUN", "PROPN") and definite:
            self.tok[t.i] = self.shared_node(f"noun:{lemma}", lemma)
            return
        agent_of = self.agentive(lemma) if t.pos_ == "NOUN" else None
        if agent_of is not None:  # explorer: (p / person :ARG0-of (e / explore-01))
            self.tok[t.i] = self.new("person")
            self.rel(self.new(agent_of), ":ARG0", self.tok[t.i])
            return
        self.tok[t.i] = self.new(NOUN_CONCEPTS.get(lemma, lemma or low))

    @staticmethod
    def agentive(lemma: str) -> str | None:
        """The frame of an agent noun (``explorer`` -> ``explore-01``), or None."""
        if len(lemma) < 5 or not lemma.endswith(("er", "or")) or lemma in NOT_AGENTIVE:
            return None
        frames = set(frame_senses().values())
        for stem in (lemma[:-2], lemma[:-1], lemma[:-3]):
            if f"{stem}-01" in frames:
                return f"{stem}-01"
        return None

    def verb_concept(self, t) -> str:
        lemma = t.lemma_.lower()
        if lemma == "be":
            return "be"  # replaced by its complement in copula(), or in existentials()
        if lemma == "have":
            return "have-03"
        if lemma == "do":
            return "do-02"
        frames = frame_senses()
        if f"{lemma}-01" in frames.values() or lemma not in frames:
            return f"{lemma}-01"
        return frames[lemma]

    def copula_complement(self, t):
        for c in t.children:
            if c.dep_ in ("attr", "acomp"):
                return c
        return None

    def is_question(self) -> bool:
        return self.doc.text.rstrip().rstrip('"').rstrip().endswith("?")

    def relative_head(self, t) -> int | None:
        """The node of the noun a relative pronoun stands for, if it is one."""
        clause = t.head if t.dep_ != "pobj" else t.head.head
        while clause.dep_ not in ("relcl", "acl") and clause.head.i != clause.i:
            if clause.dep_ in ("ROOT",):
                return None
            clause = clause.head
        if clause.dep_ not in ("relcl", "acl"):
            return None
        noun = clause.head
        if noun.i not in self.tok and noun.i not in self.skip:
            self.token_node(noun)
        return self.tok.get(noun.i)

    # -- named entities
    def entity(self, ent) -> None:
        label = ent.label_
        words = [t for t in ent if t.pos_ not in ("DET", "PUNCT", "PART") and t.text != "'s"]
        if not words:
            return
        if label == "CARDINAL":
            return  # numbers are constants
        node = None
        if label == "DATE":
            node = self.date(ent, words)
        elif label == "TIME":
            node = self.time(words)
        elif label == "MONEY":
            node = self.amount(words, "monetary-quantity")
        elif label == "PERCENT":
            node = self.percent(words)
        elif label == "ORDINAL":
            value = _ordinal(words[0].text)
            if value is not None:
                node = self.new("ordinal-entity")
                self.attr(node, ":value", value)
        elif label == "QUANTITY":
            node = self.amount(words, None)
        elif label in NE_TYPES and any(t.pos_ == "PROPN" for t in words):
            name = [t.text for t in words]
            etype = self.entity_type(label, " ".join(name))
            key = f"ne:{etype}:{' '.join(name).lower()}"
            if key in self.shared:
                node = self.shared[key]
            else:
                node = self.shared_node(key, etype)
                n = self.new("name")
                self.rel(node, ":name", n)
                for k, w in enumerate(name, 1):
                    self.attr(n, f":op{k}", _quote(w))
        if node is None:
            return
        for i in range(ent.start, ent.end):
            self.tok[i] = node
            if self.doc[i].i != ent.root.i:
                self.skip.add(i)

    @staticmethod
    def entity_type(label: str, name: str) -> str:
        if label == "GPE":
            return "country" if name.lower().removeprefix("the ") in COUNTRIES else "city"
        if label == "ORG" and GOVERNMENT_WORDS.search(name):
            return "government-organization"
        return NE_TYPES[label]

    def date(self, ent, words) -> int | None:
        text = [t.text.lower() for t in words]
        unit = next((t.lemma_.lower() for t in words if t.lemma_.lower() in TIME_UNITS), None)
        num = next((_number(t.text) for t in words if _number(t.text)), None)
        if unit and num and not any(re.fullmatch(r"\d{4}", w) for w in text):
            node = self.new("temporal-quantity")
            self.attr(node, ":quant", num)
            self.rel(node, ":unit", self.new(unit))
            return node
        node = self.new("date-entity")
        found = False
        for k, w in enumerate(text):
            if re.fullmatch(r"1\d{3}|20\d{2}", w):
                self.attr(node, ":year", w)
                found = True
            elif w in MONTHS and (w != "may" or len(text) > 1):
                self.attr(node, ":month", str(MONTHS[w]))
                found = True
            elif re.fullmatch(r"\d{1,2}(st|nd|rd|th)?", w) and (
                (k > 0 and text[k - 1] in MONTHS) or (k + 1 < len(text) and text[k + 1] in MONTHS)
            ):
                self.attr(node, ":day", re.sub(r"\D", "", w))
                found = True
            elif w in WEEKDAYS:
                self.rel(node, ":weekday", self.new(w))
                found = True
        if not found:
            self.nodes[node].concept = ent.root.lemma_.lower()
        return node

    def time(self, words) -> int:
        node = self.new("date-entity")
        text = " ".join(t.text.lower() for t in words)
        m = re.search(r"(\d{1,2})(?::(\d\d))?\s*(o'clock|am|pm|a\.m\.|p\.m\.)?", text)
        if m and (m.group(2) or m.group(3)):
            hour = int(m.group(1)) + (12 if (m.group(3) or "").startswith("p") else 0)
            self.attr(node, ":time", _quote(f"{hour}:{m.group(2) or '00'}"))
        else:
            for t in words:
                if t.lemma_.lower() in TIME_NOUNS:
                    self.rel(node, ":dayperiod", self.new(t.lemma_.lower()))
                    break
            else:
                self.nodes[node].concept = words[-1].lemma_.lower()
        return node

    def amount(self, words, concept: str | None) -> int | None:
        num = _number(" ".join(t.text for t in words if t.like_num or t.lower_ in NUMBER_WORDS))
        unit = None
        for t in words:
            w = t.lemma_.lower()
            if concept == "monetary-quantity" and (w in CURRENCIES or t.text in CURRENCIES):
                unit = CURRENCIES.get(w) or CURRENCIES[t.text]
            elif concept is None and _number(t.text) is None:
                unit = w
        if concept is None:
            concept = next((k for k, units in QUANTITY_UNITS.items() if unit in units), "quantity")
        node = self.new(concept)
        if num is not None:
            self.attr(node, ":quant", num)
        if unit:
            self.rel(node, ":unit", self.new(unit))
        return node

    def percent(self, words) -> int:
        node = self.new("percentage-entity")
        num = _number(" ".join(t.text.rstrip("%") for t in words if t.text not in ("%", "percent")))
        if num is not None:
            self.attr(node, ":value", num)
        return node

    # -- pass 2: edges
    def head_node(self, t):
        """The nearest head of ``t`` that is a node, and the token through which it is reached."""
        via = t
        h = t.head
        while h.i != via.i:
            if h.i in self.tok and self.tok[h.i] != self.tok.get(t.i):
                return self.tok[h.i], via
            via, h = h, h.head
        return None, via

    def attach(self, t) -> None:
        if t.i in self.skip:
            return
        low = t.text.lower()
        if low in NEGATORS or t.dep_ == "neg":
            if t.pos_ == "PRON":
                pass
            else:
                self.negate(t)
                return
        if t.dep_ == "aux" and t.i in self.tok:
            self.modal(t)
            return
        if t.i in self.merged:
            return
        if t.i not in self.tok:
            if (t.pos_ == "NUM" or t.like_num) and t.i not in self.ents:
                self.number(t)
            return
        node = self.tok[t.i]
        if t.dep_ == "ROOT" or t.head.i == t.i:
            self.copula(t)
            return
        head, via = self.head_node(t)
        if head is None:
            return
        if t.dep_ == "relcl" and any(self.tok.get(c.i) == head for c in t.subtree):
            return  # the relative pronoun already links the clause to its noun
        if t.dep_ == "conj":
            self.coordinate(t, head)
            return
        role = self.role(t, via, head)
        if role is None:
            return
        if role in ROLE_FRAMES:
            self.frame_role(role, head, self.outer(node))
        elif role.endswith("-of"):
            self.rel(self.outer(node), role[:-3], head)
        else:
            self.rel(head, role, self.outer(node))
        self.copula(t)

    def frame_role(self, role: str, head: int, node: int) -> None:
        """``X because Y``: ``(c / cause-01 :ARG0 Y :ARG1 X)`` in X's place; ``like Y``:
        ``X :ARG1-of (r / resemble-01 :ARG2 Y)``."""
        concept, dep_role, head_role, takes_place = ROLE_FRAMES[role]
        frame = self.new(concept)
        self.rel(frame, dep_role, node)
        if takes_place:
            current = self.outer(head)
            self.rel(frame, head_role, current)
            self.redirect(current, frame)
            self.wrapper[head] = frame
        else:
            self.rel(frame, head_role, head)

    def copula(self, t) -> None:
        """Make a copula's complement stand in for ``be``: ``(happy :domain X)``."""
        if t.i not in self.tok or self.nodes[self.tok[t.i]].concept != "be":
            return
        node = self.tok[t.i]
        comp = self.copula_complement(t)
        subj = next((c for c in t.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if comp is None or comp.i not in self.tok:
            return
        cnode = self.tok[comp.i]
        self.merged.add(comp.i)
        if cnode == node:
            return
        # the complement takes over the copula's node: its concept, edges and attributes
        self.nodes[node].concept = self.nodes[cnode].concept
        self.nodes[node].edges += self.nodes[cnode].edges
        self.nodes[node].attrs += self.nodes[cnode].attrs
        self.nodes[cnode] = _Node("__merged__")
        for k in list(self.tok):
            if self.tok[k] == cnode:
                self.tok[k] = node
        for n in self.nodes:
            n.edges = [(r, node if x == cnode else x) for r, x in n.edges]
        if subj is not None and subj.i in self.tok:
            self.nodes[node].edges = [
                (r, x) for r, x in self.nodes[node].edges if x != self.tok[subj.i]
            ]
            frame = FRAME_LIKE.match(self.nodes[node].concept)
            self.rel(node, ":ARG1" if frame else ":domain", self.tok[subj.i])

    def role(self, t, via, head) -> str | None:
        dep = t.dep_
        head_tok = t.head
        verb = self.nodes[head].concept.endswith("-01") or head_tok.pos_ in ("VERB", "AUX")
        low = t.text.lower()
        concept = self.nodes[self.tok[t.i]].concept if t.i in self.tok else ""
        if low in WH_ROLES and concept == "amr-unknown":
            return WH_ROLES[low]
        if via is not t and via.pos_ == "ADP":
            return self.prep_role(via, t, head_tok)
        if via is not t and via.dep_ == "agent":
            return ":ARG0"
        if dep in ("nsubj", "csubj"):
            if head_tok.lemma_.lower() == "be":
                return ":domain"
            lemma = head_tok.lemma_.lower()
            has_obj = any(c.dep_ in ("dobj", "ccomp", "xcomp") for c in head_tok.children)
            args = frame_table().get(self.nodes[head].concept)
            if args is not None and "ARG0" not in args:
                return ":ARG1"  # the frame has no agent: arrive-01, happen-01
            return ":ARG1" if lemma in UNACCUSATIVE and not has_obj else ":ARG0"
        if dep in ("nsubjpass", "csubjpass"):
            return ":ARG1"
        if dep == "dobj" and any(c.dep_ in ("ccomp", "xcomp") for c in head_tok.children):
            return ":ARG2"  # ask them whether ...: the clause is the ARG1
        if dep in ("dobj", "ccomp", "xcomp", "attr", "acomp", "oprd"):
            return ":ARG1"
        if dep in ("dative", "iobj"):
            return ":ARG2"
        if dep == "pobj":
            return self.prep_role(head_tok, t, head_tok.head)
        if dep == "agent":
            return ":ARG0"
        if dep == "advcl":
            mark = next((c.lower_ for c in t.children if c.dep_ in ("mark", "advmod")), None)
            if mark in MARKER_ROLES:
                return MARKER_ROLES[mark]
            if any(c.lower_ == "to" and c.pos_ == "PART" for c in t.children):
                return ":purpose"
            return ":time"
        if dep in ("relcl", "acl"):
            if dep == "acl" and t.tag_ == "VBN":
                return ":ARG1-of"
            return ":ARG0-of" if not any(c.dep_ == "nsubj" for c in t.children) else ":ARG1-of"
        if dep == "poss":
            return ":poss"
        if dep == "nummod":
            return ":quant"
        if concept == "ordinal-entity":
            return ":ord"
        if dep == "det":
            return ":quant" if low in QUANTIFIERS else ":mod"
        if dep == "amod" and FRAME_LIKE.match(concept):
            return ":ARG1-of"  # a good sheep: (s / sheep :ARG1-of (g / good-02))
        if dep in ("amod", "compound", "nmod", "appos", "quantmod"):
            return ":quant" if low in QUANTIFIERS else ":mod"
        if dep in ("advmod", "npadvmod"):
            if low in TIME_ADVERBS or t.lemma_.lower() in TIME_NOUNS:
                return ":time"
            if low in DEGREE_ADVERBS:
                return ":degree"
            if low in ("here", "there", "everywhere", "somewhere", "away", "home"):
                return ":location"
            if low.endswith("ly") and verb:
                return ":manner"
            return ":mod"
        if dep == "intj":
            return ":mod"
        return ":mod"

    def prep_role(self, prep, obj, governor) -> str:
        p = prep.lower_
        if p == "by" and prep.dep_ == "agent":
            return ":ARG0"
        lemma = governor.lemma_.lower()
        if p == "to" and lemma in TRANSFER_VERBS:
            return ":ARG2"
        if p == "for" and obj.pos_ in PERSONISH:
            return ":beneficiary"
        if p == "with" and (obj.pos_ in PERSONISH or obj.ent_type_ == "PERSON"):
            return ":accompanier"
        if p in ("in", "on", "at", "during") and (
            obj.lemma_.lower() in TIME_NOUNS or obj.ent_type_ in ("DATE", "TIME")
        ):
            return ":time"
        if p in PREP_ROLES:
            return PREP_ROLES[p]
        # a role name cannot hold Penman's delimiters: spaCy takes "HTTP/1.1" or "f('x" for a
        # preposition on code-like lines, and ":prep-http/1.1" would not decode
        name = _NOT_SYMBOL.sub("-", p).strip("-")
        return f":prep-{name}" if name else ":mod"

    def coordinate(self, t, first_node: int) -> None:
        """``X and Y``: one ``and`` node in X's place with :op1 X, :op2 Y, ..."""
        first = t.head
        while first.dep_ == "conj" and first.head.i != first.i:
            first = first.head
        key = f"coord:{first.i}"
        node = self.outer(self.tok[t.i])
        if first.i not in self.tok:  # the first conjunct is no node (a preposition ...)
            self.rel(first_node, ":op1", node)
            return
        if key not in self.shared:
            cc = next((c.lower_ for c in first.children if c.dep_ == "cc"), None)
            cc = cc or next((c.lower_ for c in t.children if c.dep_ == "cc"), "and")
            concept = {"or": "or", "but": "contrast-01", "nor": "or"}.get(cc, "and")
            coord = self.shared_node(key, concept)
            fnode = self.outer(self.tok[first.i])
            self.redirect(fnode, coord)
            self.rel(coord, ":ARG1" if concept == "contrast-01" else ":op1", fnode)
            self.conjuncts[coord] = 1
        coord = self.shared[key]
        self.conjuncts[coord] += 1
        n = self.conjuncts[coord]
        concept = self.nodes[coord].concept
        self.rel(coord, ":ARG2" if concept == "contrast-01" else f":op{n}", node)

    def redirect(self, old: int, new: int) -> None:
        """Edges into ``old`` go to ``new`` (it takes ``old``'s place in the graph)."""
        for k, n in enumerate(self.nodes):
            if k != new:
                n.edges = [(r, new if x == old else x) for r, x in n.edges]
        for key, v in self.wrapper.items():
            if v == old:
                self.wrapper[key] = new
        self.wrapper[old] = new
        for k in [k for k, v in self.wrapper.items() if k == new]:
            del self.wrapper[k]

    def negate(self, t) -> None:
        target = t.head
        if target.i in self.tok:
            node = self.outer(self.tok[target.i])
        else:
            node, _ = self.head_node(t)
            if node is None:
                return
        self.attr(node, ":polarity", "-")
        if t.lower_ == "never":
            self.rel(node, ":time", self.new("ever"))

    def modal(self, t) -> None:
        mnode = self.tok[t.i]
        verb = t.head
        if verb.i not in self.tok:
            return
        vnode = self.tok[verb.i]
        current = self.outer(vnode)
        self.rel(mnode, ":ARG1", current)
        self.redirect(current, mnode)
        self.wrapper[vnode] = mnode

    def number(self, t) -> None:
        value = _number(t.text)
        if value is None:
            return
        head, via = self.head_node(t)
        if head is None:
            return
        role = ":quant" if t.dep_ in ("nummod", "quantmod") else self.role(t, via, head) or ":quant"
        if role.endswith("-of"):
            role = ":quant"
        self.attr(head, role, value)

    def share_subject(self, t) -> None:
        """A complement or conjoined verb without a subject shares its head's subject."""
        if t.dep_ not in ("xcomp", "conj") or t.i not in self.tok:
            return
        if any(c.dep_ in ("nsubj", "nsubjpass") for c in t.children):
            return
        head = t.head
        subj = next((c for c in head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subj is None or subj.i not in self.tok:
            return
        if t.dep_ == "conj" and head.pos_ not in ("VERB", "AUX"):
            return
        node = self.tok[t.i]
        if self.nodes[node].concept.endswith("-01") or self.nodes[node].concept.endswith("-03"):
            lemma = t.lemma_.lower()
            role = ":ARG1" if lemma in UNACCUSATIVE or subj.dep_ == "nsubjpass" else ":ARG0"
            if not any(r == role for r, _ in self.nodes[node].edges):
                self.rel(node, role, self.tok[subj.i])

    def sentence_root(self, sent) -> int | None:
        root = sent.root
        if root.i not in self.tok:
            cands = [t for t in sent if t.i in self.tok]
            if not cands:
                return None
            node = self.tok[cands[0].i]
        else:
            node = self.tok[root.i]
        node = self.outer(node)
        initial = {c.lower_ for c in root.children if c.dep_ == "cc" and c.i < root.i}
        if initial & {"but", "and"} and not any(c.dep_ == "conj" for c in root.children):
            # a sentence that opens with But / And continues the text before it
            wrap = self.new("contrast-01" if "but" in initial else "and")
            self.rel(wrap, ":ARG2" if "but" in initial else ":op2", node)
            node = wrap
        text = sent.text.rstrip().rstrip('"').rstrip()
        has_subject = any(c.dep_ in ("nsubj", "nsubjpass", "expl") for c in root.children)
        if (
            root.tag_ == "VB"
            and not has_subject
            and not any(c.dep_ == "aux" for c in root.children)
            and root.i in self.tok
        ):
            self.attr(self.tok[root.i], ":mode", "imperative")
            you = self.shared_node("pron:you", "you")
            self.rel(self.tok[root.i], ":ARG0", you)
        elif text.endswith("?") and not any(
            self.nodes[self.tok[t.i]].concept == "amr-unknown" for t in sent if t.i in self.tok
        ):
            self.attr(node, ":mode", "interrogative")
        return node


# --------------------------------------------------------------------------- Penman output


def _variables(nodes: list[_Node], used: Iterable[int]) -> dict[int, str]:
    names: dict[int, str] = {}
    counts: dict[str, int] = {}
    for k in used:
        concept = nodes[k].concept
        first = next((ch for ch in concept if ch.isalpha() and ch.isascii()), "x").lower()
        counts[first] = counts.get(first, 0) + 1
        names[k] = first if counts[first] == 1 else f"{first}{counts[first]}"
    return names


#: Characters a Penman symbol cannot hold (penman's lexer; nor a leading ``#``): a lemma such as
#: ``haspart/``, ``a:b`` or ``#`` would otherwise give a graph no reader can decode. Only graphs
#: that failed to decode change, and those were never cached: RULES_VERSION stays.
_NOT_SYMBOL = re.compile(r'[\s"()/:~]+')
#: A whole Penman string constant (penman's lexer's STRING).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _symbol(value: str) -> str:
    """``value`` as a Penman symbol: forbidden characters become ``-`` (``thing`` if none left);
    quoted strings and clean symbols (``-``, ``1.5``) are returned as they are."""
    if _STRING.fullmatch(value) or not (_NOT_SYMBOL.search(value) or value.startswith("#")):
        return value
    # a leading "#" starts a Penman comment
    return _NOT_SYMBOL.sub("-", value).strip("-").lstrip("#").strip("-") or "thing"


def to_penman(nodes: list[_Node], top: int) -> str:
    """Penman text of the nodes reachable from ``top`` (edges in either direction)."""
    import penman

    reach: list[int] = []
    seen = {top}
    stack = [top]
    incoming: dict[int, list[int]] = {}
    for k, n in enumerate(nodes):
        for _, x in n.edges:
            incoming.setdefault(x, []).append(k)
    while stack:
        k = stack.pop(0)
        reach.append(k)
        for nxt in [x for _, x in nodes[k].edges] + incoming.get(k, []):
            if nxt not in seen and nodes[nxt].concept != "__merged__":
                seen.add(nxt)
                stack.append(nxt)
    var = _variables(nodes, reach)
    triples = []
    for k in reach:
        triples.append((var[k], ":instance", _symbol(nodes[k].concept)))
    for k in reach:
        for role, x in nodes[k].edges:
            if x in var and x != k:
                triples.append((var[k], role, var[x]))
        for role, value in nodes[k].attrs:
            triples.append((var[k], role, _symbol(str(value))))
    return penman.encode(penman.Graph(triples, top=var[top]), indent=6)


def doc_to_amr(doc) -> str:
    """One spaCy ``Doc`` (tagged, parsed, with entities) as a Penman graph.

    Raises:
        ValueError: The text has no content word (punctuation only, empty).
    """
    nodes, top = _Converter(doc).build()
    if top < 0:
        raise ValueError(f"no content word in {doc.text!r}")
    return to_penman(nodes, top)
