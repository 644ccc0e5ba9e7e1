"""Secrets never reach results, logs, command records or messages: planted for real and searched for."""

from __future__ import annotations

import json
import os
import secrets as token_source

import pytest

from harness.results import redact, table as results
from tests.conftest import TINY

pytest.importorskip("torch")


@pytest.mark.parametrize("text, hidden", [
    ("s3://AKIDEXAMPLE:wJalrXUtnFEMIK7MDENG@127.0.0.1:8333/bucket", "wJalrXUtnFEMIK7MDENG"),
    ("https://acct.blob.core.windows.net/c/x?sv=2021&sig=abc%2Bdef123&se=2030", "abc%2Bdef123"),
    ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNO==;", "Eby8vdM02xNO=="),
    ("aws_secret_access_key = wJalrXUtnFEMIK7MDENG", "wJalrXUtnFEMIK7MDENG"),
    ("nfs://user:hunter22@127.0.0.1/export", "hunter22"),
])
def test_secret_patterns_are_masked(text, hidden):
    clean = redact.scrub(text, [])
    assert hidden not in clean and redact.MASK in clean


def test_ordinary_text_is_left_alone():
    text = "rank 1: RuntimeError: https://127.0.0.1:8333/bucket/key.tar size=5 key_count=3"
    assert redact.scrub(text, []) == text


def test_values_of_secret_named_variables_are_masked_wherever_they_appear():
    env = {"AZURE_STORAGE_KEY": "Zm9vYmFyYmF6cXV4", "HOME": "/root", "MY_TOKEN": "abc"}  # abc: too short to mask
    # the value and its encoded forms (tests/unit/results/test_value_net.py), never the short one
    assert "Zm9vYmFyYmF6cXV4" in redact.secret_values(env)
    assert set(redact.secret_values(env)) == {"Zm9vYmFyYmF6cXV4"} | redact.encoded_forms("Zm9vYmFyYmF6cXV4")
    assert redact.scrub("key Zm9vYmFyYmF6cXV4 at /root", redact.secret_values(env)) == "key *** at /root"
    assert redact.scrub_env(env) == {"AZURE_STORAGE_KEY": "***", "HOME": "/root", "MY_TOKEN": "***"}


@pytest.mark.runs
def test_a_planted_secret_reaches_no_output(monkeypatch, write_scenario, tmp_path, capfd):
    from harness.cli import main as cli
    from tests.helpers import faults
    from tests.runs.test_faults import FAULTY

    secret = token_source.token_hex(16)
    monkeypatch.setenv("ROSETTA_TEST_SECRET", secret)
    monkeypatch.setenv("ROSETTA_TEST_FAULT", "secret:1:0")
    faults.register(monkeypatch)
    out = tmp_path / "results"
    path = write_scenario(FAULTY.format(procs=2, timeout=120))
    assert cli.main(["run", str(path), "--results", str(out)]) == 1  # the run failed: CI must see it
    assert cli.main(["report", "--results", str(out)]) == 0
    printed = capfd.readouterr()
    table = results.load(out)
    assert table["status"].tolist() == ["failed"] and "RuntimeError: could not open" in table["reason"][0]

    assert secret not in printed.out + printed.err
    assert secret not in table.to_csv()  # parquet compresses: search the decoded table
    files = [p for p in out.rglob("*") if p.is_file() and p.suffix != ".parquet"]
    assert any(p.name == "rank1.log" for p in files)  # where the worker printed it
    for file in files:
        assert secret.encode() not in file.read_bytes(), f"{file} holds the secret"


# ------------------------------------------------------------------ every URL-valued option, every output file

def _credential_cases():
    """(table path, key, value, the secret inside it): a credential in every URL-valued option."""
    pw, sig, qpw, key = (token_source.token_hex(8) for _ in range(4))
    return [
        (("storage_options", "s3"), "endpoint_url", f"http://user:{pw}@127.0.0.1:8333", pw),
        (("storage_options", "s3"), "url", f"s3://user:{pw}@bucket/prefix", pw),
        (("storage_options", "blob"), "url", f"https://acct.blob.core.windows.net/c/d?sv=2022&sig={sig}", sig),
        (("storage_options", "blob"), "url", f"https://acct.blob.core.windows.net/c/d?password={qpw}", qpw),
        (("storage_options", "nfs"), "url", f"nfs://user:{pw}@127.0.0.1/export", pw),
        (("storage_options", "cached"), "cache_dir", f"/tmp/x?token={qpw}", qpw),
        (("launcher_options", "kubernetes"), "image", f"https://user:{pw}@registry.example/rosetta:1", pw),
        (("launcher_options", "slurm"), "extra_sbatch", [f"--comment=AccountKey={key};"], key),
    ]


@pytest.mark.parametrize("where, key, value, secret", _credential_cases(),
                         ids=lambda v: v if isinstance(v, str) and len(v) < 16 else "")
def test_a_credential_in_any_url_valued_option_is_refused_in_one_line(where, key, value, secret, write_scenario,
                                                                      capsys):
    from harness.cli import main as cli

    table, name = where
    path = write_scenario(f"""
        [matrix]
        framework = "torch_ddp"
        workload = "resnet50"
        [{table}.{name}]
        {key} = {json.dumps(value)}
        """)
    assert cli.main(["run", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"[{table}.{name}] {key}: holds " in err and "environment" in err
    assert secret not in err


SWEEP = TINY.replace("procs_per_node = [1, 2]", "procs_per_node = 1")
CLUSTER_RUNS = """
[[include]]
framework = "torch_ddp"
launcher = "slurm"
[[include]]
framework = "torch_ddp"
launcher = "kubernetes"
[launcher_options.slurm]
account = "{account}"
[launcher_options.kubernetes]
namespace = "{namespace}"
"""


@pytest.mark.runs
def test_planted_secrets_reach_no_file_of_a_dry_run_or_a_real_run_and_rows_stay_intact(
        monkeypatch, write_scenario, tmp_path, capfd):
    """Distinct secrets in the environment (storage keys, a connection string, a token equal to a workload
    name) and in scenario values that reach the spec, batch script and manifest; every file grepped.
    (A worker printing a secret into its log and the row's reason: test_a_planted_secret_reaches_no_output.)"""
    from harness.cli import main as cli

    planted = {"AWS_SECRET_ACCESS_KEY": token_source.token_hex(16),
               "SLURM_ACCOUNT_PASSWORD": token_source.token_hex(12), "K8S_NS_TOKEN": token_source.token_hex(12)}
    conn_key = token_source.token_hex(16)
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", f"AccountName=a;AccountKey={conn_key};")
    monkeypatch.setenv("HF_TOKEN", "resnet50")  # a secret that happens to equal a dimension's value
    secrets = [*planted.values(), conn_key]
    dry_path = write_scenario(SWEEP + CLUSTER_RUNS.format(account=planted["SLURM_ACCOUNT_PASSWORD"],
                                                          namespace=planted["K8S_NS_TOKEN"]), "dry.toml")
    out = tmp_path / "results"
    assert cli.main(["run", str(dry_path), "--results", str(out), "--dry-run"]) == 0
    dry = [p for p in (out / "dry-run").rglob("*") if p.is_file()]
    assert {"spec.json", "command.json", "job.sbatch", "job.yaml"} <= {p.name for p in dry}
    assert cli.main(["run", str(write_scenario(SWEEP)), "--results", str(out)]) == 0
    printed = capfd.readouterr()
    table = results.load(out)
    by_framework = {(r["framework"], r["launcher"]): r for r in table.to_dict("records")}
    ok = by_framework[("torch_ddp", "torchrun")]
    assert ok["status"] == "ok" and ok["workload"] == "resnet50"  # HF_TOKEN=resnet50 masked no dimension
    assert json.loads(ok["spec"])["workload"] == "resnet50"
    files = [p for p in out.rglob("*") if p.is_file() and p.suffix != ".parquet"]
    assert any(p.name == "rank0.log" for p in files) and any(p.parent.parent.parent.name == "dry-run" for p in files)
    for file in files:
        data = file.read_bytes()
        for secret in secrets:
            assert secret.encode() not in data, f"{file} holds a planted secret"
    text = printed.out + printed.err + table.to_csv()
    for secret in secrets:
        assert secret not in text
    for run_json in out.rglob("spec.json"):
        assert json.loads(run_json.read_text())["run"]["workload"] == "resnet50"
    for row_json in out.rglob("row.json"):
        assert json.loads(row_json.read_text())["workload"] == "resnet50"


def test_masking_by_value_never_touches_dimensions_but_masks_free_text(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "resnet50")
    monkeypatch.setenv("MY_SECRET", "hunter2hunter2")
    row = {"framework": "torch_ddp", "workload": "resnet50", "collective": "allreduce",
           "reason": "rank 0: key hunter2hunter2 refused for resnet50", "spec": '{"account": "hunter2hunter2"}'}
    clean = redact.scrub_row(row)
    assert clean["workload"] == "resnet50" and clean["framework"] == "torch_ddp"
    assert clean["reason"] == "rank 0: key *** refused for resnet50"  # the dimension's value is public anyway
    assert clean["spec"] == '{"account": "***"}'


# ------------------------------------------------------------------ what a killed harness leaves

def test_files_of_a_run_that_never_finished_are_scrubbed_by_rebuild(monkeypatch, tmp_path, capsys):
    """Any file name a launcher writes (SLURM's slurm-<job>.out, a sub-folder's), not only the harness's own."""
    from harness.cli import main as cli

    secret = token_source.token_hex(12)
    monkeypatch.setenv("STORAGE_PASSWORD", secret)
    out = tmp_path / "results"
    killed = out / "runs" / "s1" / "0000"
    (killed / "ranks").mkdir(parents=True)
    leftovers = {"launcher.log": f"password {secret}\n", "slurm-4242.out": f"s3://AKIA:{secret}/x+y@bucket\n",
                 "ranks/rank0.err": f"HF_TOKEN={secret}\n"}
    for name, text in leftovers.items():
        (killed / name).write_text(text)
    finished = out / "runs" / "s1" / "0001"
    finished.mkdir()
    results.write_row_json(finished / "row.json", {"schema_version": 2, "sweep_id": "s1", "run_id": "s1/0001",
                                                   "status": "ok", "timestamp": "t"})
    assert cli.main(["rebuild", "--results", str(out)]) == 0
    assert "masked credentials in 3 files of runs that never finished" in capsys.readouterr().out
    for name in leftovers:
        assert secret not in (killed / name).read_text(), name
    # private still (issue 52): the scrub knows this shell's secrets, not those of the shell the run was killed in
    assert (killed / "launcher.log").stat().st_mode & 0o777 == 0o600


@pytest.mark.runs
def test_a_harness_killed_mid_run_leaves_a_private_log_that_resume_scrubs(monkeypatch, write_scenario, tmp_path):
    """A real sweep: a rank prints a secret and hangs; the harness is SIGKILLed while the run is still going. Its folder holds the secret in clear, readable by its owner alone, until
    ``run --resume`` scrubs it."""
    from harness.cli import main as cli
    from tests.helpers import faults
    from tests.helpers.killed_runs import KILLED, kill_once_leaked

    secret = token_source.token_hex(16)
    out, path = tmp_path / "results", write_scenario(KILLED)
    run_dir = kill_once_leaked(path, out, secret)
    assert not (run_dir / "row.json").exists()
    assert (run_dir / "launcher.log").stat().st_mode & 0o077 == 0  # private while it may hold secrets
    monkeypatch.setenv("ROSETTA_TEST_SECRET", secret)
    faults.register(monkeypatch)
    assert cli.main(["run", str(path), "--results", str(out), "--resume"]) == 2  # no sweep of it in the table
    for file in (p for p in run_dir.rglob("*") if p.is_file()):
        assert secret.encode() not in file.read_bytes(), f"{file} holds the secret"


# ------------------------------------------------------------------ what a killed run recorded at launch

def test_a_killed_runs_record_scrubs_its_folder_from_a_shell_without_its_variables(monkeypatch, tmp_path):
    """The record holds the secrets' salted hashes alone (0600); a scrub from a shell that lacks the variable
    masks the value wherever it stands (any text around it, twice in a line), and the log is then no longer
    private; without a record the log stays private (its secrets unknown)."""
    from harness.running.runner import LAUNCHER_LOG, scrub_unfinished

    secret = token_source.token_hex(12)
    monkeypatch.setenv("STORAGE_PASSWORD", secret)
    out = tmp_path / "results"
    recorded, unrecorded = out / "runs" / "s1" / "0000", out / "runs" / "s1" / "0001"
    for run_dir in (recorded, unrecorded):
        (run_dir / "ranks").mkdir(parents=True)
        (run_dir / LAUNCHER_LOG).write_text(f"x{secret}y and again:{secret}\n")
        (run_dir / "ranks" / "rank0.err").write_text(f"[{secret}]")
        os.chmod(run_dir / LAUNCHER_LOG, 0o600)
    record = redact.record_secrets(recorded)
    assert record.stat().st_mode & 0o777 == 0o600 and secret not in record.read_text()
    monkeypatch.delenv("STORAGE_PASSWORD")
    scrub_unfinished(out)
    assert (recorded / LAUNCHER_LOG).read_text() == "x***y and again:***\n"
    assert (recorded / "ranks" / "rank0.err").read_text() == "[***]"
    assert (recorded / LAUNCHER_LOG).stat().st_mode & 0o077 == 0o666 & ~results.umask() & 0o077
    assert secret in (unrecorded / LAUNCHER_LOG).read_text()  # nothing known of it here: left private
    assert (unrecorded / LAUNCHER_LOG).stat().st_mode & 0o777 == 0o600


def test_recorded_masking_merges_overlapping_secrets():
    record = ("salt", {(len(v), redact._digest("salt", v)) for v in ("abcdef", "defghi", "zzzzzz")})  # noqa: SLF001
    assert redact.mask_recorded("..abcdefghi..zzzzzzz", record) == "..***..***"
    assert redact.mask_recorded("nothing here", record) == "nothing here"
