"""The Streamlit app's pages (app.py runs planner.app.main): thin, each page calls the library."""
