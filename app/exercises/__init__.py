"""The Exercises page's parts: an exercise chosen, answered and revealed, the answers kept in the
browser, and the class's counts."""
