"""The simulated kube-scheduler's cache: nodeTree zone round robin, the feasible-node sampling and the
in-tree filters that decide which NodeNames the extender sees."""

from __future__ import annotations

from typing import Any

from sim.kubescheduler.cache import NodeTree, SchedulerCache, feasible_to_find, zone_key


def node(name: str, zone: str, region: str = "r1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": region,
                "pool": "gpu",
            },
        },
        "spec": spec,
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "3", "nvidia.com/gpu": "80"}},
    }


def pod(name: str, cpu: str = "1", node_name: str = "", **spec: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": limits}}
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container], "nodeName": node_name, **spec},
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def test_node_tree_lists_one_node_per_zone_per_round() -> None:
    tree = NodeTree()
    for name, zone in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a"), ("c1", "c"), ("c2", "c")]:
        tree.add(name, zone)
    assert tree.list() == ["a1", "b1", "c1", "a2", "c2", "a3"]
    tree.remove("b1", "b")  # an emptied zone disappears
    assert tree.zones == ["a", "c"]
    assert tree.list() == ["a1", "c1", "a2", "c2", "a3"]
    tree.add("b2", "b")  # and comes back last
    assert tree.list() == ["a1", "c1", "b2", "a2", "c2", "a3"]


def test_zone_key_is_region_and_zone() -> None:
    assert zone_key(node("n", "z1", "r1")) == "r1:\x00:z1"
    assert zone_key({"metadata": {"name": "bare"}}) == ""


def test_cache_orders_nodes_by_zone_in_order_of_appearance() -> None:
    cache = SchedulerCache(["nvidia.com/gpu", "nvidia.com/gpumem"])
    for i in range(1, 7):
        cache.set_node(node(f"n{i}", "ab"[(i - 1) // 3]))  # n1-n3 in a, n4-n6 in b
    feasible, failed = cache.feasible(pod("p"))
    assert feasible == ["n1", "n4", "n2", "n5", "n3", "n6"] and failed == {}
    cache.set_node(node("n4", "c"))  # a zone change moves the node
    assert cache.feasible(pod("p"))[0] == ["n1", "n5", "n4", "n2", "n6", "n3"]


def test_feasible_nodes_to_find_follows_kube_scheduler() -> None:
    assert feasible_to_find(50) == 50  # below 100 nodes: all of them
    assert feasible_to_find(150) == 100  # 49 % would be 73: at least 100
    assert feasible_to_find(1000) == 420  # adaptive 50 - 1000/125 = 42 %
    assert feasible_to_find(5000) == 500  # 10 %
    assert feasible_to_find(20000) == 1000  # floor of 5 %
    assert feasible_to_find(1000, percentage=20) == 200


def test_search_stops_after_enough_feasible_nodes_and_rotates() -> None:
    cache = SchedulerCache(["nvidia.com/gpu", "nvidia.com/gpumem"])
    for i in range(120):
        cache.set_node(node(f"n{i:03d}", "a"))
    first, _ = cache.feasible(pod("p"))
    assert len(first) == 100 and first[0] == "n000"
    second, _ = cache.feasible(pod("p"))
    assert second[0] == "n100" and second[20] == "n000"


def test_in_tree_filters_and_resource_accounting() -> None:
    cache = SchedulerCache(["nvidia.com/gpu", "nvidia.com/gpumem"])
    cache.set_node(node("free", "a"))
    cache.set_node(node("cordoned", "a", unschedulable=True))
    cache.set_node(node("tainted", "a", taints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}]))
    cache.set_node(node("busy", "a"))
    cache.set_pod(pod("running", cpu="3500m", node_name="busy"))
    feasible, failed = cache.feasible(pod("p"))
    assert feasible == ["free"]
    assert failed == {
        "cordoned": "node(s) were unschedulable",
        "tainted": "node(s) had untolerated taint",
        "busy": "Insufficient cpu",
    }
    tolerant = pod("t", tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert cache.feasible(tolerant)[0] == ["free", "tainted"]
    assert cache.feasible(pod("s", nodeSelector={"pool": "cpu"}))[0] == []
    assert cache.feasible(pod("big", cpu="5"))[0] == []
    # assumed pods count until forgotten; terminal pods stop counting
    cache.assume(pod("a1", cpu="3500m"), "free")
    assert cache.feasible(pod("p"))[0] == []
    cache.forget("default/a1")
    assert cache.feasible(pod("p"))[0] == ["free"]
    done = pod("running", cpu="3500m", node_name="busy")
    done["status"]["phase"] = "Succeeded"
    cache.set_pod(done)
    assert cache.feasible(pod("p"))[0] == ["free", "busy"]
    for i in range(3):  # allocatable pods: 3
        cache.set_pod(pod(f"x{i}", cpu="0", node_name="free"))
    assert cache.feasible(pod("p"))[1]["free"] == "Too many pods"
