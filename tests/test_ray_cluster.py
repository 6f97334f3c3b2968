"""RayVecEnv across two Ray nodes: actors placed on both, SyncVectorEnv's results, a node lost.

The cluster is Ray's own test cluster (``ray.cluster_utils.Cluster``) on this machine: a head
node and a second node, each a raylet with its own CPU and resources, which is what
``ray start --head`` and ``ray start --address`` start on two machines. The driver (this
process) joins it through ``RayVecEnv(address=...)``, as a script joins a real cluster.

It takes as long as Ray takes to start two nodes: on our 2-core VM, 38 s in all, 19 s of it
starting the nodes (measured with its processes given a larger CPU share on a machine at load
17-24: see the README's Ray section, and :func:`node_arguments` for what a loaded machine does).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

import psutil
import pytest
from conftest import (
    assert_no_new_children,
    assert_same,
    describe,
    kill_all,
    live_children,
    new_children_left,
)
from gymnasium.vector import SyncVectorEnv

from vecenvs.errors import WorkerDiedError
from vecenvs.factory import env_fns_for

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'vecenvs[ray]'")

from ray.cluster_utils import Cluster

from vecenvs.ray_env import RayVecEnv

# A failed try to start the nodes took 45-60 s here: three of them and the test fit in 400 s.
pytestmark = pytest.mark.timeout(400)

#: The ports a raylet otherwise waits for its agents to pick and write into files.
AGENT_PORTS = (
    "metrics_agent_port",
    "metrics_export_port",
    "dashboard_agent_listen_port",
    "runtime_env_agent_port",
)


def free_port() -> int:
    """A TCP port nobody listens on now (the OS's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def node_arguments(**resources: float) -> dict:
    """One node: one CPU, these custom resources, and as few of Ray's helpers as it allows.

    A raylet waits at most 15 s for its agents to write their ports into files, then aborts
    (the node "timed out during startup"); on this 2-core VM under a load of 8 the dashboard
    agent alone took longer. So its agents are given their ports (it then waits for one file
    only, the agent's HTTP port, which Ray 2.60 does not pass on) and fewer Python helpers
    start alongside: no dashboard, no log monitor (nobody reads the workers' prints), no
    autoscaler monitor (nothing to scale).
    """
    ports = {name: free_port() for name in AGENT_PORTS}
    quiet = {"include_dashboard": False, "include_log_monitor": False, "no_monitor": True}
    return {"num_cpus": 1, "resources": resources, **quiet, **ports}


def start_two_nodes(attempts: int = 3) -> tuple[Cluster, object]:
    """A head node (1 CPU, 1 "slot") and a second node (1 CPU, 1 "slot", 2 "envs").

    "slot" and "envs" are custom resources the test's actors ask for to be placed.

    Tried again when a raylet aborts at start-up as above (a loaded machine), at most
    ``attempts`` times, each failed try's processes stopped.
    """
    error: Exception | None = None
    for _ in range(attempts):
        before = {process.pid for process in live_children()}
        cluster = Cluster()  # its first node is the head
        try:
            cluster.add_node(**node_arguments(slot=1))
            return cluster, cluster.add_node(**node_arguments(slot=1, envs=2))
        except Exception as failure:
            if "timed out during startup" not in str(failure):
                raise
            error = failure
            cluster.shutdown()
            kill_all(new_children_left(before, timeout=5.0))
    pytest.fail(
        f"Ray could not start two nodes in {attempts} tries (load {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs): a raylet aborts when its dashboard agent takes over 15 s to "
        f"start; see /tmp/ray/session_latest/logs/raylet.out. {error}"
    )


@dataclass
class TwoNodes:
    """The cluster, its second node, and every process seen in it (checked gone at the end).

    Processes that were running before the cluster started (the multiprocess resource
    tracker and forkserver earlier tests left for the whole session: ``live_children`` does
    not list them, so ``before`` holds every descendant) are not the cluster's.
    """

    cluster: Cluster
    second: object  # ray._private.node.Node
    before: set[int] = field(default_factory=set)
    processes: set[psutil.Process] = field(default_factory=set)

    def remember_processes(self) -> None:
        children = psutil.Process().children(recursive=True)
        self.processes.update(child for child in children if child.pid not in self.before)


@pytest.fixture
def two_nodes():
    """Two Ray nodes (:func:`start_two_nodes`); at the end, every process of theirs gone."""
    assert not ray.is_initialized(), "another test left Ray running"
    before = {process.pid for process in live_children()}
    descendants = {process.pid for process in psutil.Process().children(recursive=True)}
    cluster, second = start_two_nodes()
    nodes = TwoNodes(cluster, second, descendants)
    try:
        nodes.remember_processes()
        yield nodes
    finally:
        nodes.remember_processes()
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
        # Every Ray process of either node, the actors and the removed node's included, ends
        # (those the raylets started are not our children: they are checked by pid).
        left = psutil.wait_procs(list(nodes.processes), timeout=15)[1]
        if left:
            text = describe(left)
            kill_all(left)
            pytest.fail(f"{len(left)} Ray process(es) still running after shutdown:\n{text}")
        assert_no_new_children(before, 5.0, "after the cluster's shutdown ")


def test_actors_on_two_nodes_step_as_sync_vector_env_and_a_lost_node_is_named(two_nodes):
    cluster, second = two_nodes.cluster, two_nodes.second

    # Custom resources pin the actors: only the second node has "envs" to give. (num_cpus=0:
    # an actor given a custom resource also holds a CPU, and that node has one.)
    pinned = {"resources": {"envs": 1}, "num_cpus": 0}
    fns = env_fns_for("CartPole-v1", 4)
    with RayVecEnv(fns, 2, address=cluster.address, actor_options=pinned) as envs:
        assert envs.worker_nodes == [second.node_id, second.node_id]
        envs.reset(seed=0)
    assert not ray.is_initialized()  # it joined the cluster itself, so it left it on close

    # The default placement, Ray's SPREAD, with one "slot" per node asked of each actor: one
    # actor on each node. (SPREAD alone is best effort: under a load of 5 on this VM it once
    # put both on the head.)
    fns = env_fns_for("CartPole-v1", 6)
    one_per_node = {"resources": {"slot": 1}, "num_cpus": 0}
    envs = RayVecEnv(fns, 2, address=cluster.address, timeout=60.0, actor_options=one_per_node)
    reference = SyncVectorEnv(fns)
    try:
        head = next(node["NodeID"] for node in ray.nodes() if node["NodeID"] != second.node_id)
        assert sorted(envs.worker_nodes) == sorted([head, second.node_id])
        two_nodes.remember_processes()
        actor_pids = [pid for _, pid in envs.worker_locations]

        assert_same(envs.reset(seed=3), reference.reset(seed=3))
        envs.action_space.seed(4)
        for step in range(40):  # episodes end and restart on both nodes
            actions = envs.action_space.sample()
            assert_same(envs.step(actions), reference.step(actions), f"step {step}")

        cluster.remove_node(second)  # its raylet, agents and the actor on it end
        lost = envs.worker_nodes.index(second.node_id)
        with pytest.raises(WorkerDiedError) as info:
            envs.step(envs.action_space.sample())
        assert info.value.worker_index == lost
        assert info.value.env_indices == list(envs.chunks[lost])
        assert isinstance(info.value.__cause__, ray.exceptions.RayActorError)
        assert envs.closed and envs.actors == []  # it closed itself, killing the other actor
        alive = psutil.wait_procs(processes(actor_pids), timeout=10)[1]
        assert not alive, f"actors still running after close:\n{describe(alive)}"
        assert not ray.is_initialized()  # and left the cluster
    finally:
        envs.close()
        reference.close()


def processes(pids: list[int]) -> list[psutil.Process]:
    """The processes of these pids that still exist."""
    found = []
    for pid in pids:
        try:
            found.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    return found
