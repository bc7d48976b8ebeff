"""The Map: 2-D/3-D layouts of an index (UMAP, PCA) and which passages to draw."""
