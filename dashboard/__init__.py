"""The Streamlit dashboard: renders only; data and writes go through the same query and service
functions the REST API uses.
"""
