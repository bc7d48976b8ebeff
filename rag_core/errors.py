"""The one line a user is shown for an error.

>>> first_line(ValueError("bad K\\nmore detail"))
'bad K'
>>> first_line(ValueError(), "that did not work")
'that did not work'
"""


def first_line(e: BaseException, fallback: str | None = None, limit: int | None = None) -> str:
    """The first line of `e`'s message, cut to `limit` characters; `fallback` (or the error's type
    name) when the message is empty."""
    line = next((t for t in str(e).splitlines() if t.strip()), None) or fallback or type(e).__name__
    return line[:limit] if limit else line
