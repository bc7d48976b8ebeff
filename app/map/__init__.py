"""The Map page's parts: the figure, where its rank numbers go, the passage table and the query moved
by hand."""
