"""A run killed with SIGKILL, then resumed from a shell without the variables it had: its folder is scrubbed
with the secrets the killed run recorded at launch (salted hashes, harness.results.redact.record_secrets), and
its launcher.log is readable to others only once it no longer holds them (issue 52)."""

from __future__ import annotations

import os
import secrets as token_source
import subprocess

import pytest

from tests.helpers.killed_runs import KILLED, kill_once_leaked

pytest.importorskip("torch")


def test_a_killed_run_is_scrubbed_with_its_own_secrets_from_a_shell_without_them(monkeypatch, write_scenario,
                                                                                  tmp_path):
    from harness.cli import main as cli
    from harness.results import redact
    from tests.helpers import faults

    secret = token_source.token_hex(16)
    out, path = tmp_path / "results", write_scenario(KILLED)
    run_dir = kill_once_leaked(path, out, secret)
    record = run_dir / redact.RECORD
    assert record.stat().st_mode & 0o777 == 0o600 and secret not in record.read_text()  # hashes, never the value
    assert (run_dir / "launcher.log").stat().st_mode & 0o077 == 0
    assert any(secret.encode() in p.read_bytes() for p in run_dir.rglob("*") if p.is_file())  # in clear, so far
    # the resuming shell: none of the killed run's variables
    monkeypatch.delenv("ROSETTA_TEST_SECRET", raising=False)
    assert not any(token_source.compare_digest(v, secret) for v in os.environ.values())
    faults.register(monkeypatch)
    assert cli.main(["run", str(path), "--results", str(out), "--resume"]) == 2  # no sweep of it in the table
    found = subprocess.run(["grep", "-rl", "--", secret, str(out)], capture_output=True, text=True)
    assert found.returncode == 1, f"the secret is still in {found.stdout.split()}"
    for file in (p for p in run_dir.rglob("*") if p.is_file()):
        assert secret.encode() not in file.read_bytes(), f"{file} holds the secret"
    assert "***" in (run_dir / "launcher.log").read_text() or any(
        "***" in p.read_text(errors="replace") for p in run_dir.rglob("*.log"))
