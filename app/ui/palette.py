"""Every colour the app's charts and views draw with, named by role: a colour that means one thing
has one name, so it means the same thing on every page. Nothing here calls Streamlit.

Hex strings and rgba strings are both as plotly takes them. The CSS of the `st.html` style blocks
(app/ui/answer_card.py, app/main.py) keeps its own colours: they style the page, not a chart.
"""

from __future__ import annotations

from rag_core.loupe.token_sources import END, FORCED, KNOWN, SEVERAL, UNSEEN, WEIGHTS

# ---------------- passages ----------------

# One colour per retrieved passage, by its 0-based position z: Plotly's ten, then D3's ten.
PASSAGE_COLORS = [
    "#636EFA",
    "#EF553B",
    "#00CC96",
    "#AB63FA",
    "#FFA15A",
    "#19D3F3",
    "#FF6692",
    "#B6E880",
    "#FF97FF",
    "#FECB52",
    "#1F77B4",
    "#FF7F0E",
    "#2CA02C",
    "#D62728",
    "#9467BD",
    "#8C564B",
    "#E377C2",
    "#7F7F7F",
    "#BCBD22",
    "#17BECF",
]


def passage_color(z: int) -> str:
    """The colour of the passage at 0-based position `z` (the list repeats past 20).

    >>> passage_color(0), passage_color(21)
    ('#636EFA', '#EF553B')
    """
    return PASSAGE_COLORS[z % len(PASSAGE_COLORS)]


# ---------------- the two decodings and their quantities ----------------

TOKEN_BLUE = "#636EFA"  # RAG-Token: its p_tok bars and the responsibility r_i(z) it mixes by
SEQUENCE_RED = "#EF553B"  # RAG-Sequence: its p_seq bars and the prefix posterior p(z|x,y_≤i)
STUFFED_GREEN = "#00A383"  # the stuffed reading, where it is drawn beside the two marginals
PRIOR_GREY = "#bbbbbb"  # the retriever's prior p(z|x), beside the posteriors
DROP_BEFORE = "#c6cbf7"  # the citations' drop chart: the posterior before removing passages (pale blue)
DROP_AFTER = TOKEN_BLUE  # the citations' drop chart: the posterior after removing them
SENTENCE_HELPS = "#2ca02c"  # a sentence whose removal makes the answer less likely
SENTENCE_IDLE = "#bbbbbb"  # a sentence whose removal does not

# ---------------- the question on the maps ----------------

QUESTION_RED = "#e4002b"  # the question's star, the query moved by hand, the query's walk
QUESTION_RGB = "228, 0, 43"  # QUESTION_RED as r, g, b: the tables' probability tint (alpha added)
TOP_K_LINE = "rgba(20,20,20,0.55)"  # the Map's lines from the query to its top K
RING_BLACK = "#111"  # the Map's rings on the top K and their rank numbers

# ---------------- the Map's topics ----------------

# Tableau-10 less its red (red is the question) and grey (kept for passages without a topic), plus four more.
TOPIC_COLORS = [
    "#4E79A7",
    "#F28E2B",
    "#76B7B2",
    "#59A14F",
    "#EDC948",
    "#B07AA1",
    "#FF9DA7",
    "#9C755F",
    "#17BECF",
    "#000075",
    "#808000",
    "#911EB4",
]
NO_TOPIC_GREY = "#9A948F"  # the passages without a topic

# ---------------- training ----------------

PULL, PUSH = "#1a9850", "#d73027"  # toward a passage (bracket > 0, a training step's pull), away (< 0)
TRAIN_PRIOR_GREY = "#8c8c8c"  # the Train page's prior p(z|x) bars
RAISED_BLUE = "#2166ac"  # the Train page's posterior bars and log p(y|x) line: what training raises
GAP_RED = "#b2182b"  # the Train page's prior–posterior gap, which training closes
OTHER_PASSAGE_GREY = "#b8b8b8"  # the walk's map: passages never in a step's top K
STAYED_GREY = "#4d4d4d"  # the walk's map: a passage in the first top K and the last
PASSED_BY = "#f4a582"  # the walk's map: a passage in some step's top K, not the first's nor the last's

# ---------------- right and wrong: two runs compared (the Sankey), the class's exercise counts --------

RIGHT_GREEN = "#1e7b1e"  # the nodes of right answers
WRONG_RED = "#b81d1d"  # the nodes of wrong answers (every outcome but right)
SANKEY_RIGHT = "rgba(44,160,44,0.22)"  # a link into a right answer: pale, behind the labels
SANKEY_WRONG = "rgba(214,39,40,0.18)"  # a link into a wrong answer: pale, behind the labels
SANKEY_TEXT = "#1a1a1a"  # the labels: near-black, at least 7:1 on white and on the pale links
REASONED_GREY = "#a0a0a0"  # an exercise answered with a reason, which is not graded

# ---------------- where each token came from ----------------

SEVERAL_GREY = "#a0a0a0"  # a token several passages carried
UNHELD_BLACK = "#2f2f2f"  # a token the model already knew, no passage holding it (or none checked)
KNOWN_GREY = "#5b5b5b"  # a token the model already knew that a passage holds (hatched as well)
KNOWN_HATCH = "#8c8c8c"  # the hatching over KNOWN_GREY: not told by colour alone
FORCED_PALE = "#e8e8e8"  # a token the generation config forced, and the end token
SOURCE_COLORS = {  # by `token_sources.kind`; a PASSAGE token takes its passage's colour
    SEVERAL: SEVERAL_GREY,
    WEIGHTS: UNHELD_BLACK,
    KNOWN: KNOWN_GREY,
    UNSEEN: UNHELD_BLACK,
    FORCED: FORCED_PALE,
    END: FORCED_PALE,
}
