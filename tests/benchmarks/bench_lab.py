"""Lab up/down time for 2 clusters x 3 nodes x 10 pods, apiserver start reported apart, and its memory; the same
for a real-node lab (2 x 3 nodes); `make image` cold and cached, and the image sizes."""
import time

from tests.benchmarks.report import figure
from tests.lab import Lab


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _mem_available_mib() -> float:
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run_light():
    """The light lab (netns nodes and pods, no kubelet)."""
    before = _mem_available_mib()
    t0 = time.monotonic()
    lab = Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, pods_per_node=10)
    lab.up()
    total_up = time.monotonic() - t0
    try:
        figure("2 apiservers + etcd start (parallel)", lab.timings["apiservers_start"], "s")
        figure("lab up, apiserver start excluded (2x3 nodes, 60 pods)", lab.timings["up_without_apiservers"], "s",
               target=20)
        figure("lab up, total", total_up, "s")
        for name, c in lab.clusters.items():
            figure(f"  cluster {name}: dataplane (netns, veth, routes)", c.timings["dataplane"], "s")
            figure(f"  cluster {name}: API registration (3 nodes, 30 pods)", c.timings["register"], "s")
        rss = {role: _rss_mib(pid) for c in lab.clusters.values() for role, pid in c.apiserver.pids.items()
               for role in [f"{c.name}/{role}"]}
        for role, mib in sorted(rss.items()):
            figure(f"  RSS {role}", mib, "MiB")
        figure("lab processes RSS total", sum(rss.values()), "MiB")
        figure("MemAvailable drop while the lab is up (incl. kernel)", before - _mem_available_mib(), "MiB")
    finally:
        lab.down()
    figure("lab down (2 clusters, 69 netns, 4 processes)", lab.timings["down"], "s", target=5)


def _lab_pids(lab) -> set[int]:
    """Every process of a real-node lab: in its netns (control planes, kubelets, containerds, shims,
    kube-proxies), in its cgroups (containers), and the ones it recorded (etcd, forwarders)."""
    import glob  # pylint: disable=import-outside-toplevel
    from tests.lab import netns  # pylint: disable=import-outside-toplevel
    pids = {p for n in netns.list_netns() if n.startswith(lab.prefix) for p in netns.pids_in_netns(n)}
    for procs in glob.glob(f"/sys/fs/cgroup/memory/{lab.prefix}*/**/cgroup.procs", recursive=True):
        with open(procs, encoding="utf-8") as f:
            pids.update(int(p) for p in f.read().split())
    for c in lab.clusters.values():
        pids.update(c.apiserver.pids.values())
    return pids


def _image_build(cache: str) -> float:
    import os  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    from tests.lab.images import ROOT  # pylint: disable=import-outside-toplevel
    t0 = time.monotonic()
    subprocess.run(["bash", os.path.join(ROOT, "deploy", "image", "build.sh")], check=True, capture_output=True,
                   env={**os.environ, "LIQO_FABRIC_CACHE": cache})
    return time.monotonic() - t0


def run_images():
    """`make image` cold (an empty cache of its own: Debian and PyPI downloads included) and cached."""
    import os  # pylint: disable=import-outside-toplevel
    import shutil  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel
    from tests.lab.images import images  # pylint: disable=import-outside-toplevel
    cache = tempfile.mkdtemp(prefix="liqo-fabric-image-bench-")
    try:
        cold = _image_build(cache)
        cached = _image_build(cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    figure("make image, cold (mmdebstrap + PyPI + archive)", cold, "s")
    figure("make image, cached (nothing changed)", cached, "s", target=5)
    figure("cached / cold", cached / cold, "x")
    img = images()
    figure("fabric image size (uncompressed OCI archive)", os.path.getsize(img["fabric"]["archive"]) / 2**20, "MiB",
           target=250)
    figure("tiny image size (busybox: workloads, CRI sandbox)", os.path.getsize(img["tiny"]["archive"]) / 2**20, "MiB")


def run_real():
    """Real-node lab: 2 clusters x 3 nodes (kubelet, containerd, kube-proxy per node; control plane per
    cluster), builds excluded (images and binaries are made before the clock starts)."""
    from tests.lab.apiserver import kube_bin_dir  # pylint: disable=import-outside-toplevel
    from tests.lab.images import images  # pylint: disable=import-outside-toplevel
    from tests.lab.imagestore import seed_root  # pylint: disable=import-outside-toplevel
    kube_bin_dir()
    seed_root(images())  # the images and the containerd root holding them: builds, not part of up()
    before = _mem_available_mib()
    t0 = time.monotonic()
    lab = Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, real_nodes=True)
    lab.up()
    total_up = time.monotonic() - t0
    try:
        figure("real-node lab up, total (2x3 nodes, all Ready)", total_up, "s", target=60)
        figure("  control planes start (parallel)", lab.timings["apiservers_start"], "s")
        for name, c in lab.clusters.items():
            figure(f"  cluster {name}: nodes started (containerd, images, kubelet)", c.timings["nodes_started"], "s")
            figure(f"  cluster {name}: slowest image import of a node", c.timings["images_import_max"], "s")
            figure(f"  cluster {name}: nodes registered and Ready", c.timings["nodes_ready"], "s")
        pids = _lab_pids(lab)
        rss = sum(_rss_mib(p) for p in pids)
        figure(f"real-node lab processes RSS total ({len(pids)} processes)", rss, "MiB", target=3072)
        figure("MemAvailable drop while the lab is up (incl. kernel, page cache)", before - _mem_available_mib(), "MiB")
    finally:
        lab.down()
    figure("real-node lab down", lab.timings["down"], "s", target=15)


def run():
    run_light()
    print("  -- real-node lab", flush=True)
    run_real()
    print("  -- images", flush=True)
    run_images()
