import streamlit as st

st.title("citations")
st.info("Coming soon.")
