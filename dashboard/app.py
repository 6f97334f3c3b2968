"""The vecenvs dashboard: ``streamlit run dashboard/app.py`` (or ``make dashboard``).

This file only routes, and heads each page with its title: each page is its own small module
in ``views/`` (listed in ``common.PAGES``), whose docstring says what it is for.

Benchmarks never run inside this server: pages queue jobs that a separate runner process
measures one at a time (see ``common.py`` and :mod:`vecenvs.bench.jobs`).

It listens on this machine only, however it is started: ``.streamlit/config.toml`` beside this
file (Streamlit reads it whatever the working folder) says ``localhost``, no usage statistics
and no "Deploy" menu, and the pages refuse to run if another address was forced anyway.
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
    """Route to the page the address names, under its title."""
    # The icon is a file of ours, served by this server: a Material icon as the tab's icon would be
    # fetched from fonts.gstatic.com, and these pages fetch nothing from anywhere else.
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
    with st.sidebar:
        common.queue_status()
    st.title(pages.title)  # the page's title, as named in the navigation
    pages.run()


# Streamlit runs this file as __main__. A process started with "spawn" from a program whose main
# module this is (Streamlit's AppTest in the tests) runs the file again under another name, and
# must not build the app there: outside a Streamlit server the navigation has no pages.
if __name__ == "__main__":
    main()
