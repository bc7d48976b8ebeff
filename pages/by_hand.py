import streamlit as st

st.title("by_hand")
st.info("Coming soon.")
