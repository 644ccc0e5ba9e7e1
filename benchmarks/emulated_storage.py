"""Storage at accelerator speed on this machine: scenarios/storage_emulated.toml (emulated H100s per
backend, 1 to 8) and, with --checkpoint, scenarios/storage_checkpoint.toml (a checkpoint saved by rank 0
and loaded by every rank), against real servers started here on free ports.

Makes a dataset (`rosetta data make`'s JPEGs) in a temporary folder, starts SeaweedFS (S3), Azurite
(Blob), NFS-Ganesha (exporting the folder read-write; read through libnfs over NFSv4, checkpoints over
NFSv3 where the scenario says nfs_version = 3) and a JuiceFS gateway in front of
SeaweedFS (the cache tier; the dataset written through it), fills the servers' addresses into the
scenario's storage options and runs it one backend and size at a time: a cold `juicefs` run gets a
gateway restarted with an empty block cache, `juicefs_warm` reads its share through the tier first. A
backend whose server cannot start here is left out, saying why. Prints the rows' AU, throughput, data
stall and hit rate, the most emulated accelerators each backend sustained at AU >= threshold, charts
them (and, with --checkpoint, the seed's published save/load times beside the measured ones), and
appends the figures to benchmarks/RESULTS.md with the machine and its load.
--storage-link RATE (a `network` axis value: 1gbit, 100mbit, ...) puts SeaweedFS, Azurite and NFS-Ganesha
on a storage host behind a link capped at RATE both ways (testbed/storage_host.py, root and
iproute2): S3, Blob and NFS are then read over the link, and the JuiceFS gateway stays on this side, its
block cache in front of the link and its blocks in SeaweedFS behind it. The dataset is uploaded before the
cap is set; `local` is never behind it.
Each framework of the scenario (torch_ddp, tf_mwms, chainer) feeds its emulated accelerators through its
own input pipeline; --frameworks runs others instead (any framework: horovod_torch and horovod_tf feed
theirs through torch_ddp's and tf_mwms's pipelines and barrier through Horovod).
Usage: python benchmarks/emulated_storage.py [--count 400] [--sizes 1,2,4,8] [--backends local,s3,...]
       [--frameworks torch_ddp,...] [--storage-link 1gbit] [--checkpoint [--checkpoint-mb 64,512] [--repeats N]] [--results DIR]
"""

from __future__ import annotations

import argparse
import copy
import os
import secrets
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402

from harness.base import config, network  # noqa: E402
from harness.base.environment import own_tools_first  # noqa: E402
from harness.experiment import scenario  # noqa: E402
from harness.reports import charts, emulation  # noqa: E402
from harness.reproduction import reference  # noqa: E402
from harness.results import provenance  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402
from harness.storage import backends as storage, datagen  # noqa: E402
from testbed import servers, storage_host  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KEY = "rosetta-bench"


class Servers:
    """The real servers on free ports, and the storage options that point a scenario at them."""

    def __init__(self, stack: ExitStack, work: Path, data: Path, wanted: set[str], link: str | None = None):
        self.stack, self.work, self.data, self.secret = stack, work, data, secrets.token_hex(16)
        # uncapped while the dataset is uploaded, capped below before any run; asked for and not possible
        # here, the benchmark stops (storage_host.Unavailable says why) rather than measure without the cap
        self.host = stack.enter_context(storage_host.storage_host()) if link else None
        self.s3_url = f"s3://rosetta/{data.name}"  # the dataset's folder name: imagenet, bert
        os.environ.update(AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=self.secret)
        self.urls: dict[str, dict[str, str]] = {"local": {"url": str(data)}}
        self.missing: dict[str, str] = {}
        self.s3 = self._start("s3", lambda: servers.seaweedfs(work / "weed", KEY, self.secret, host=self.host))
        if self.s3:
            self.urls["s3"] = {"url": self.s3_url, "endpoint_url": self.s3}
            storage.Store("s3", self.urls["s3"]).fs.mkdir("rosetta")
            storage.upload(data, "s3", self.urls["s3"])
        if "blob" in wanted and (conn := self._start("blob", lambda: servers.azurite(work / "azurite", host=self.host))):
            os.environ["AZURE_STORAGE_CONNECTION_STRING"] = conn
            self.urls["blob"] = {"url": f"abfs://rosetta/{data.name}"}
            storage.Store("blob", self.urls["blob"]).fs.mkdir("rosetta")
            storage.upload(data, "blob", self.urls["blob"])
        mount_port = servers.free_port()  # NFSv3's MOUNT service (a checkpoint writes NFSv3 at full size)
        if "nfs" in wanted and (url := self._start("nfs", lambda: servers.nfs_ganesha(
                data.parent, work / "ganesha", nfsv3_mount_port=mount_port, writable=True, host=self.host))):
            self.urls["nfs"] = {"url": f"{url}/{data.name}"}
            self.nfs_v3 = {"url": f"nfs://{urlsplit(url).netloc}{data.resolve()}", "nfs_mount_port": mount_port}
        if self.s3 and wanted & {"juicefs", "juicefs_warm"}:
            try:
                with self.gateway() as gateway:  # the data written through the tier (JuiceFS stores blocks)
                    storage.upload(data, "s3", {"url": self.s3_url, "endpoint_url": gateway.endpoint})
            except servers.Unavailable as exc:
                self.missing["juicefs"] = str(exc)
        if self.host:
            self.host.cap(link)

    def _start(self, name: str, start):
        try:
            return self.stack.enter_context(start())
        except servers.Unavailable as exc:
            self.missing[name] = str(exc)
            return None

    def gateway(self):
        """A JuiceFS gateway on the volume, its block cache emptied (cold)."""
        return servers.juicefs_gateway(self.work / "juicefs", f"{self.s3}/jfs", KEY, self.secret, cache_mb=2048)

    def options(self, backend: str, gateway=None, nfs_version: int = 4) -> dict | None:
        if backend.startswith("juicefs"):
            return None if gateway is None else {"url": self.s3_url, "endpoint_url": gateway.endpoint,
                                                 "metrics_url": gateway.metrics_url}
        if backend == "nfs" and nfs_version == 3 and "nfs" in self.urls:
            return self.nfs_v3
        return self.urls.get(backend)


def run_one(doc: dict, path: str, backend: str, procs: int, options: dict, results: Path) -> list[dict]:
    """The scenario's runs (its repeats) of one backend and size."""
    doc = copy.deepcopy(doc)
    doc["matrix"]["storage"], doc["matrix"]["procs_per_node"] = backend, procs
    doc["storage_options"] = {backend: {**doc["storage_options"][backend], **options}}
    local = doc["storage_options"][backend]
    if local.get("checkpoint_dir", "").startswith("/"):  # the scenario's folder: put it in our scratch
        local["checkpoint_dir"] = str(Path(options.get("scratch", "/tmp")) / "checkpoints")
    local.pop("scratch", None)
    return run_sweep(scenario.parse(doc, path, default_name=doc["name"]), results)


def run_scenario(path: Path, srv: Servers, backends: list[str], sizes: list[int] | None, results: Path,
                 frameworks: list[str] | None = None, checkpoint_mb: float | None = None,
                 repeats: int = 0, measured_steps: int = 0) -> pd.DataFrame:
    doc = config.read_toml(path)
    if frameworks:
        doc["matrix"]["framework"] = frameworks
    if checkpoint_mb is not None:  # a size other than the scenario's
        for options in doc["storage_options"].values():
            options["checkpoint_mb"] = checkpoint_mb
    if repeats:
        doc["settings"]["repeats"] = repeats
    if measured_steps:
        doc["settings"]["measured_steps"] = measured_steps
    rows = []
    for backend in backends:
        for procs in sizes or [int(doc["matrix"]["procs_per_node"])]:
            with (srv.gateway() if backend.startswith("juicefs") else ExitStack()) as gateway:
                options = srv.options(backend, gateway, doc["storage_options"].get(backend, {}).get("nfs_version", 4))
                if options is None:
                    continue
                if backend == "local":
                    options = {**options, "scratch": str(srv.work)}
                for row in run_one(doc, str(path), backend, procs, options, results):
                    print(f"{row['framework']:10s} {backend:13s} x{procs}: {row['status']} {row.get('reason') or ''}",
                          flush=True)
                    rows.append(row)
    return pd.DataFrame(rows)


def emulation_table(frame: pd.DataFrame) -> str:
    lines = ["| framework | storage | emulated accelerators | samples/s | AU | AU ok | data stall | read MB/s | hit rate | host CPU busy | loader CPU-bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in frame.sort_values(["framework", "storage", "world_size"]).itertuples():
        if r.status != "ok":
            lines.append(f"| {r.framework} | {r.storage} | {r.world_size} | {r.status}: {r.reason} | | | | | | | |")
            continue
        hit = "-" if pd.isna(r.cache_hit_rate) else f"{r.cache_hit_rate:.2f}"
        lines.append(f"| {r.framework} | {r.storage} | {r.world_size} | {r.throughput:.1f} | {r.au:.1%} | {r.au_ok} | "
                     f"{r.data_stall_frac:.1%} | {r.read_mb_s:.1f} | {hit} | {r.host_cpu_busy:.0%} | {r.loader_cpu_bound} |")
    return "\n".join(lines)


def max_table(best: pd.DataFrame) -> str:
    lines = ["| framework | storage | accelerator | most emulated accelerators at AU >= threshold | samples/s there | sizes tried | next size failed CPU-bound |",
             "|---|---|---|---|---|---|---|"]
    for r in best.itertuples():
        tput = "-" if r.throughput_at_max is None or pd.isna(r.throughput_at_max) else f"{r.throughput_at_max:.1f}"
        lines.append(f"| {r.framework} | {r.storage} | {r.accelerator} | {r.max_accelerators} | {tput} | {r.sizes_tried} | "
                     f"{'-' if r.limit_cpu_bound is None else r.limit_cpu_bound} |")
    return "\n".join(lines)


def checkpoint_table(frame: pd.DataFrame) -> str:
    lines = ["| storage | ranks | MB | save s | save GB/s | load s (all ranks) | load GB/s | page cache |",
             "|---|---|---|---|---|---|---|---|"]
    for r in frame.itertuples():
        if r.status != "ok":
            lines.append(f"| {r.storage} | {r.world_size} | {r.status}: {r.reason} | | | | | |")
            continue
        lines.append(f"| {r.storage} | {r.world_size} | {r.checkpoint_bytes / 1e6:.0f} | {r.checkpoint_save_s:.2f} | "
                     f"{r.checkpoint_save_gb_s:.3f} | {r.checkpoint_load_s:.2f} | {r.checkpoint_load_gb_s:.3f} | "
                     f"{r.checkpoint_cache_defeat} |")
    return "\n".join(lines)


def plot_checkpoint(frame: pd.DataFrame, path: Path) -> Path:
    """The seed's published save and load times (NFS, Alluxio; 4.7 GB, 24 loaders) beside the measured
    ones (this machine's scale), each side on its own axis: seconds do not transfer, the order does."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ref = reference.get("alluxio-nfs-azureml")
    facts = {f.label: f.value for f in ref.facts}
    fig, (pub, mine) = plt.subplots(1, 2, figsize=(11, 4.2))
    published = {"NFS": [facts[k] for k in facts if k.endswith(", NFS")],
                 "Alluxio": [facts[k] for k in facts if k.endswith(", Alluxio")]}
    for offset, (label, (save, load)) in zip((-0.2, 0.2), published.items()):
        pub.bar([0 + offset, 1 + offset], [save, load], width=0.4, label=label)
    pub.set_xticks([0, 1], ["save (rank 0)", "load"])
    pub.set_ylabel("seconds")
    pub.set_title("published: 4.7 GB, 24 loaders\n(bar labels 100, 30, 20, 11 s; which bar is which beyond\n"
                  "save and load is not stated)", fontsize=8)
    ok = frame[frame["status"] == "ok"].groupby("storage")[["checkpoint_save_s", "checkpoint_load_s"]].median()
    width = 0.8 / max(len(ok), 1)
    for i, (name, r) in enumerate(ok.iterrows()):
        offset = -0.4 + width * (i + 0.5)
        mine.bar([0 + offset, 1 + offset], [r["checkpoint_save_s"], r["checkpoint_load_s"]], width=width, label=name)
    mine.set_xticks([0, 1], ["save (rank 0)", "load"])
    mine.set_title(f"measured here: {frame['checkpoint_bytes'].dropna().iloc[0] / 1e6:.0f} MB, "
                   f"{int(frame['world_size'].iloc[0])} loaders (median of repeats)", fontsize=8)
    for ax in (pub, mine):
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Checkpoint save and load: NFS against a cache tier")
    return charts.save_figure(fig, path)


def main() -> int:
    own_tools_first()  # the environment's mpirun, torchrun, horovodrun, as `rosetta` does (not activated)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=400, help="JPEGs in the dataset")
    parser.add_argument("--sizes", default="1,2,4,8", help="emulated accelerators to try")
    parser.add_argument("--backends", default="", help="default: local,nfs,s3,blob,juicefs,juicefs_warm, or with "
                        "--checkpoint the scenario's")
    parser.add_argument("--frameworks", default="", help="frameworks to run instead of the scenario's (default: all of its)")
    parser.add_argument("--checkpoint", action="store_true", help="run scenarios/storage_checkpoint.toml instead")
    parser.add_argument("--checkpoint-mb", default="", help="checkpoint sizes in MB, one run each (default: the scenario's)")
    parser.add_argument("--repeats", type=int, default=0, help="repeats per run (default: the scenario's)")
    parser.add_argument("--storage-link", default="", help="put the storage servers behind a link capped at "
                        "this rate both ways (e.g. 1gbit, 100mbit; needs root)")
    parser.add_argument("--results", type=Path, default=ROOT / "results" / "emulated")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rosetta-emulated-"))
    data = work / "export" / "imagenet"
    datagen.make(datagen.parse_spec({"count": args.count, "layout": "files"}, "emulated_storage"), data)
    machine = provenance.machine()
    with ExitStack() as stack:
        if args.checkpoint:
            path, sizes = ROOT / "scenarios" / "storage_checkpoint.toml", None
            backends = args.backends.split(",") if args.backends else list(config.read_toml(path)["matrix"]["storage"])
        else:
            path, backends, sizes = (ROOT / "scenarios" / "storage_emulated.toml",
                                     (args.backends or "local,nfs,s3,blob,juicefs,juicefs_warm").split(","),
                                     [int(s) for s in args.sizes.split(",")])
        if args.storage_link:
            network.bits_per_s(args.storage_link)  # a bad rate fails before anything starts
        srv = Servers(stack, work, data, set(backends), args.storage_link)
        for name, why in srv.missing.items():
            print(f"left out: {name}: {why}")
        frames = [run_scenario(path, srv, backends, sizes, args.results,
                               [f for f in args.frameworks.split(",") if f] if not args.checkpoint else None,
                               checkpoint_mb=float(mb) if mb else None, repeats=args.repeats)
                  for mb in (args.checkpoint_mb.split(",") if args.checkpoint and args.checkpoint_mb else [""])]
        frame = pd.concat(frames, ignore_index=True)
        load = os.getloadavg()[0]
    shutil.rmtree(work, ignore_errors=True)  # the dataset, the servers' data and the checkpoints; rows stay in --results
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, 1-minute load {load:.1f} at the end)"
    if srv.host:
        where += (f"; S3, Blob, NFS and JuiceFS's object store on a storage host behind a {args.storage_link} "
                  "link (both ways), JuiceFS's gateway and block cache on this side")
    if args.checkpoint:
        table = checkpoint_table(frame)
        largest = frame[frame["checkpoint_bytes"] == frame["checkpoint_bytes"].max()]  # one size per chart
        chart = plot_checkpoint(largest if len(largest) else frame, args.results / "checkpoint-vs-published.png")
    else:
        table = emulation_table(frame) + "\n\n" + max_table(emulation.max_accelerators(frame))
        chart = emulation.plot(frame, args.results / "emulated-storage.png")
    print(table)
    print(f"chart: {chart}")
    if not args.no_record:
        title = "checkpoint save and load" if args.checkpoint else "emulated H100s per storage backend"
        with open(HERE / "RESULTS.md", "a") as out:
            out.write(f"\n## Storage at accelerator speed: {title} (benchmarks/emulated_storage.py"
                      f"{' --checkpoint' if args.checkpoint else ''}"
                      f"{f' --storage-link {args.storage_link}' if srv.host else ''}), {provenance.utc_now()}\n\n{where}; "
                      f"{args.count} JPEGs; left out: {srv.missing or 'nothing'}.\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
