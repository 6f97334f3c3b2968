"""The vecenvs dashboard (``streamlit run dashboard/app.py`` or ``make dashboard``): routing only.

Each page is its own module in ``views/`` (listed in ``common.PAGES``). It listens on this
machine only: ``.streamlit/config.toml`` beside this file says ``localhost``, and the pages
refuse to run if another address was forced anyway.
"""

import sys
from pathlib import Path

import streamlit as st

# The pages import `common` from this folder, however the app was started.
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import common  # noqa: E402 - needs the path above


def main() -> None:
    # The icon is served by this server: a Material icon would be fetched from fonts.gstatic.com.
    st.set_page_config(page_title="vecenvs", page_icon=str(HERE / "favicon.png"), layout="wide")
    common.refuse_unless_loopback()

    pages = st.navigation(
        [
            st.Page(
                HERE / "views" / f"{name}.py",
                title=title,
                url_path=name,
                icon=f":material/{icon}:",
                default=index == 0,
            )
            for index, (name, title, icon, _) in enumerate(common.PAGES)
        ]
    )
    st.title(pages.title)  # the page's title, as named in the navigation
    pages.run()
    # After the page: a job its form just queued is in the queue the sidebar shows.
    with st.sidebar:
        common.queue_status()


# Streamlit runs this file as __main__. A process spawned from a program whose main module this
# is (AppTest in the tests) runs it again under another name, and must not build the app there.
if __name__ == "__main__":
    main()
