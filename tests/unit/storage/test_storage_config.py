"""Scenario [storage_options]: required locations, credentials refused, options carried to the run; the
storage chart."""

import pytest

from harness.base.errors import UserError
from harness.experiment import scenario
from harness.experiment.matrix import expand
from harness.reports import storage_charts
from harness.results.table import COLUMNS, to_frame
from tests.helpers.rows import result_row

BASE = """
name = "s"
[settings]
warmup_steps = 1
measured_steps = 2
[matrix]
framework = "torch_ddp"
workload = "resnet50"
storage = {storages}
"""


def test_options_reach_the_run_spec_and_change_the_config_id(write_scenario):
    sc = scenario.load(write_scenario(BASE.format(storages='["synthetic", "local"]')
                                      + '[storage_options.local]\nurl = "/data/imagenet"\nloader_workers = 3\n'))
    synthetic, local = expand(sc)[:2]
    assert synthetic.storage_options == {} and local.storage_options["url"] == "/data/imagenet"
    assert local.storage_options["loader_workers"] == 3 and local.storage_options["verify_fraction"] == 0.05
    assert synthetic.config_id() != local.config_id()


@pytest.mark.parametrize("extra, match", [
    ("", r"\[storage_options.local\] url: missing"),
    ('[storage_options.local]\nurl = "s3://AKIA:topsecret@bucket/x"\n', "credentials"),
    ('[storage_options.ftp]\nurl = "/x"\n', "ftp"),
    ('[storage_options.local]\nurl = "/x"\nverify_fraction = 2.0\n', "verify_fraction"),
    ('[storage_options.local]\nurl = "/x"\npassword = "p"\n', "password"),
    ('[storage_options.local]\nurl = "/x"\nnfs_version = 2\n', "nfs_version"),
    ('[storage_options.local]\nurl = "/x"\nremote = "ftp"\n', "remote"),
    ('[storage_options.local]\nurl = "/x"\nlayout = "zip"\n', r"\[storage_options.local\] layout: must be one of files, shards"),
    ('[storage_options.local]\nurl = "data/imagenet"\n', r"\[storage_options.local\] url: a relative path \('data/imagenet'\)"),
    ('[storage_options.local]\nurl = "/x"\nstage_dir = "stage"\n', r"\[storage_options.local\] stage_dir: a relative path"),
])
def test_bad_storage_options_are_one_line_errors(write_scenario, extra, match):
    with pytest.raises(UserError, match=match):
        scenario.load(write_scenario(BASE.format(storages='"local"') + extra))


def test_cached_needs_remote_and_cache_dir(write_scenario):
    with pytest.raises(UserError, match="remote"):
        scenario.load(write_scenario(BASE.format(storages='"cached"') + '[storage_options.cached]\nurl = "/x"\n'))


def _row(storage, throughput, stall):
    return result_row(storage=storage, throughput=throughput, data_stall_frac=stall, loader_throughput=2 * throughput,
                      size="small")


def test_storage_chart_only_for_real_data(tmp_path):
    assert storage_charts.plot_storage(to_frame([_row("synthetic", 10.0, None)]), tmp_path / "a.png") is None
    table = to_frame([_row("synthetic", 10.0, None), _row("local", 8.0, 0.2), _row("cached", 3.0, 0.7)])
    path = storage_charts.plot_storage(table, tmp_path / "b.png")
    assert path.exists() and path.stat().st_size > 10_000
    assert {"data_stall_frac", "read_mb_s", "loader_throughput", "cache_hit_rate"} <= set(COLUMNS)


def test_nfs_takes_a_mounted_path_or_an_nfs_url_and_may_front_a_cache(write_scenario):
    sc = scenario.load(write_scenario(BASE.format(storages='["nfs", "cached"]') + """
[storage_options.nfs]
url = "nfs://filer:2049/exports/imagenet"
nfs_version = 3
[storage_options.cached]
url = "/mnt/nfs/imagenet"
remote = "nfs"
cache_dir = "/scratch/cache"
"""))
    by = {spec.storage.value: spec for spec in expand(sc)}  # one spec per repeat: the last of each
    nfs, cached = by["nfs"], by["cached"]
    assert nfs.storage_options["url"] == "nfs://filer:2049/exports/imagenet" and nfs.storage_options["nfs_version"] == 3
    assert cached.storage_options["remote"] == "nfs"


def test_layout_is_a_storage_option_defaulting_to_files(write_scenario):
    sc = scenario.load(write_scenario(BASE.format(storages='["local", "s3"]') + """
[storage_options.local]
url = "/data/imagenet"
layout = "shards"
[storage_options.s3]
url = "s3://b/imagenet"
"""))
    by = {spec.storage.value: spec for spec in expand(sc)}
    assert by["local"].storage_options["layout"] == "shards" and by["s3"].storage_options["layout"] == "files"
    assert by["local"].config_id() != by["s3"].config_id()


def test_a_backend_whose_client_is_not_installed_is_a_skipped_run_naming_the_package():
    """alluxio is declared (a scenario may name it) but alluxiofs is not installed here: the run is skipped, not failed."""
    from harness.contract.axes import Storage
    from harness.running.runner import skip_reason
    from tests.helpers.launch import run_spec as spec

    assert skip_reason(spec(storage=Storage.ALLUXIO, storage_options={"url": "/data"})) == (
        "storage alluxio needs the Python package alluxiofs (pip install alluxiofs)")
    assert skip_reason(spec(storage=Storage.LOCAL, storage_options={"url": "/data"})) is None
