"""What the grid draws in a table's cells: the display strings pandas' Styler sends with the data.
(The browser paints cells on a canvas, which a test cannot read; these strings are what it paints.)"""

import re

import pyarrow as pa
from streamlit.testing.v1 import AppTest


def shown_table(at):
    """(display strings, cell styles) of the first table the app drew."""
    styler = at.dataframe[0].proto.arrow_data.styler
    return pa.ipc.open_stream(styler.display_values).read_all().to_pandas(), styler.styles


def test_tiny_probabilities_read_in_scientific_notation_and_tint_their_cells():
    """3.21e-06, not the 0.00000321 the grid's printf format gave; 0.785 stays 0.785; integers stay
    integers; the probability column is tinted as strong as each value, the others not at all."""

    def script():
        import pandas as pd

        from app.ui import views

        views.table(
            pd.DataFrame(
                {
                    "title": ["a", "b", "c"],
                    "p": [0.785, 3.21e-6, 7.8e-5],
                    "score": [0.6721, 0.5, 12.5],
                    "rank": [1, 2, 3],
                }
            ),
            probabilities=["p"],
        )

    at = AppTest.from_function(script).run()
    assert not at.exception, at.exception
    shown, styles = shown_table(at)
    assert list(shown["p"]) == ["0.785", "3.21e-06", "7.8e-05"]
    assert list(shown["score"]) == ["0.672", "0.5", "12.5"]
    assert list(shown["rank"].astype(str)) == ["1", "2", "3"]
    tinted = set(re.findall(r"_row(\d+)_col(\d+)", styles))  # the cells a style rule names
    assert tinted == {("0", "1"), ("1", "1"), ("2", "1")}, styles  # every p cell (column 1), nothing else
    assert "rgba(228, 0, 43, 0.314)" in styles, styles  # 0.4 · 0.785
