"""Text from users, corpora and models made safe where the app shows it: literal inside Markdown
(`md_text`), escaped for a plotly label or hover (`plot_text`), a token's whitespace made visible
(`token_label`), and a passage's short labels. Nothing here calls Streamlit."""

from __future__ import annotations

import html
import re

from rag_core.loupe.vocabulary import Trace


def token_label(token: str) -> str:
    """A token as text with its whitespace visible: ' Mel' -> '␣Mel', '\\n' -> '↵'."""
    return token.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅"


def plot_text(text: str, width: int | None = None) -> str:
    """Text for a plotly label or hover: cut to `width` characters and HTML-escaped (plotly reads a
    few HTML tags in labels; escaped, a passage title shows exactly as written). Quotes stay as
    they are: plotly shows `&quot;` literally, and a label is never inside an attribute."""
    text = str(text)
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return html.escape(text, quote=False)


def passage_label(trace: Trace, z: int, width: int = 30) -> str:
    """'z1 · Herman Melville' for the passage at 0-based position z (plain text, not escaped)."""
    title = trace.hits[z].passage.title
    if len(title) > width:
        title = title[: width - 1] + "…"
    return f"z{trace.hits[z].rank} · {title}"


def passage_tick(trace: Trace, z: int, width: int = 12) -> str:
    """A two-line, escaped axis label for plotly: 'z1<br>Herman Melv…'."""
    return f"z{trace.hits[z].rank}<br>{plot_text(trace.hits[z].passage.title, width)}"


def md_text(text: str) -> str:
    """Model or user text made literal inside a Markdown string (st.warning, st.caption, widget
    labels, metric values): every Markdown, LaTeX ($), emoji-shortcode (:) and HTML (<) character
    is backslash-escaped. Escapes do not stop GFM's autolinks, which turn a bare http://…, www.… or
    a@b.c in the rendered text into a link: an invisible word joiner (U+2060) breaks each of them.

    >>> md_text("born <other> *1*")
    'born \\\\<other\\\\> \\\\*1\\\\*'
    >>> md_text("http://x.example www.x.example a@b.example")
    'http\\\\:\\u2060//x\\\\.example www\\u2060\\\\.x\\\\.example a\\u2060@b\\\\.example'
    """
    escaped = re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])", r"\\\1", str(text))
    escaped = re.sub(r"(?i)\b(www)(?=\\\.)", "\\1\u2060", escaped.replace("\\://", "\\:\u2060//"))
    return escaped.replace("@", "\u2060@")
