import streamlit as st

st.title("index_swap")
st.info("Coming soon.")
