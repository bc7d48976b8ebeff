import streamlit as st

st.title("map")
st.info("Coming soon.")
