"""The By hand page's figures."""
