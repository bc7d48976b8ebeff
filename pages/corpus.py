import streamlit as st

st.title("corpus")
st.info("Coming soon.")
