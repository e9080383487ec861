"""The driftline dashboard: a Streamlit multipage app (``streamlit run dashboard/app.py``).

Started by ``driftline dashboard``; settings come from ``DRIFTLINE_*`` (see
:mod:`dashboard.settings`). Each page is a script under ``dashboard/views`` that reads its data
through :mod:`dashboard.data`.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

#: not ``pages/``: Streamlit would also auto-discover that folder (its older multipage mode),
#: and a deep link such as /canary opened before st.navigation ran showed that menu instead
PAGES_DIR = Path(__file__).resolve().parent / "views"
#: (file, title, icon), in menu order; the first is the default page.
PAGES: tuple[tuple[str, str, str], ...] = (
    ("overview.py", "Overview", ":material/monitoring:"),
    ("latency.py", "Latency", ":material/timer:"),
    ("capacity.py", "Capacity", ":material/dns:"),
    ("cost.py", "Cost", ":material/payments:"),
    ("quality.py", "Quality", ":material/verified:"),
    ("review.py", "Review queue", ":material/rate_review:"),
    ("drift.py", "Drift", ":material/ssid_chart:"),
    ("canary.py", "Canary", ":material/call_split:"),
    ("alerts.py", "Alerts", ":material/notifications_active:"),
    ("calls.py", "Calls explorer", ":material/search:"),
    ("traces.py", "Traces", ":material/account_tree:"),
    ("sessions.py", "Sessions", ":material/forum:"),
)


def main() -> None:
    """Configure the page and run the selected page."""
    st.set_page_config(page_title="driftline", page_icon=":material/monitoring:", layout="wide")
    pages = [
        st.Page(PAGES_DIR / f, title=t, icon=i, default=n == 0) for n, (f, t, i) in enumerate(PAGES)
    ]
    st.navigation(pages).run()


# ``streamlit run`` executes this file as __main__; importing it (for PAGES) runs nothing
if __name__ == "__main__":
    main()
