"""Machine: what the numbers were measured on, which backends are installed, and whether
py-spy may attach to processes here (the Profile page needs it)."""

from __future__ import annotations

import common
import streamlit as st

from vecenvs.bench.engine import CEILING, describe
from vecenvs.bench.machine import machine_info
from vecenvs.bench.snippets import machine_code
from vecenvs.factory import BACKENDS, available_backends
from vecenvs.profile import check_attach


@st.cache_data(ttl=600, show_spinner="Trying py-spy on a small process…")
def attach_check() -> tuple[bool, str]:
    """``check_attach()`` takes about a second: ask once every ten minutes at most."""
    result = check_attach()
    return result.ok, result.message


info = machine_info()
with common.beside_code(machine_code()):
    first, second, third, fourth = st.columns(4)
    first.metric("CPUs this process may use", info["usable_cpus"] or "?")
    second.metric("Logical CPUs", info["logical_cpus"] or "?")
    third.metric("Physical cores", info["physical_cores"] or "?")
    fourth.metric("Memory", f"{info['memory_bytes'] / 2**30:.1f} GiB")
    plain = common.plain
    # Where the first number comes from: the host, an affinity mask or a container's CPU quota
    # (vecenvs.cpus); pools, the ceiling, autotune and the model all use that count.
    st.caption(f"CPUs this process may use: {plain(info['cpus_from'])}")
    st.markdown(
        f"**CPU:** {plain(info['cpu_model'])}  \n**OS:** {plain(info['os'])}  \n"
        f"**Python:** {plain(info['python'])} "
        f"({plain(info['python_implementation'])})  \n"
        f"**Host:** {plain(info['hostname'])}"
    )

st.subheader("Can py-spy attach here?")
ok, message = attach_check()
(st.success if ok else st.error)(message)
if st.button("Check again"):
    attach_check.clear()
    st.rerun()

st.subheader("Backends")
installed = {*available_backends(), CEILING}
common.table(
    {"backend": name, "installed": "yes" if name in installed else "no", "shown as": describe(name)}
    for name in [*BACKENDS, CEILING]
)
if (missing := common.missing_peers()) is not None:
    st.caption(missing)

st.subheader("Package versions")
common.table(
    {"package": name, "version": version or "not installed"}
    for name, version in info["packages"].items()
)
