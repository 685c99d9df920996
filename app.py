"""planner's Streamlit app for procurement planning. Every number comes from the library: the pages
(planner/app/) only collect inputs, call planner, and draw what it returns.

Run: .venv/bin/streamlit run app.py   (or `make demo`)
"""

from planner.app.main import main

main()
