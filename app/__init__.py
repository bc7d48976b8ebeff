"""The Streamlit app's shared state, views and charts; the pages (`pages/`) present them."""
