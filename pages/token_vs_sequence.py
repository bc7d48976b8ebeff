import streamlit as st

st.title("token_vs_sequence")
st.info("Coming soon.")
