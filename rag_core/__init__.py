"""RAG Loupe's engine: the exact RAG model of Lewis et al. (2020) and what it makes visible. It never
imports Streamlit; the command line (`cli`) and the app are its two faces."""
