"""The environment's value net (issue 52): a secret's encoded forms (base64, URL-encoded, hex) are masked
as the secret is, and a value that looks like a secret is masked whatever its variable's name.

Each check is independent of how the net finds them: the scrubbed text is decoded again every way it could
be (each base64 run at each of its four offsets, standard and URL-safe; percent-decoding, with ``+`` as a
space too; each hex run at both offsets) and the secret must be in none of them.
"""

from __future__ import annotations

import base64
import re
import secrets as token_source
import urllib.parse

from hypothesis import HealthCheck, given, settings, strategies as st

from harness.base import credentials
from harness.results import redact

SECRET = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e, blacklist_characters="*"),
                 min_size=8, max_size=40)
NOISE = st.binary(max_size=12)


def _recoverable(text: str, secret: str) -> list[str]:
    """The ways ``secret`` can still be read out of ``text``."""
    raw, found = secret.encode(), []
    if secret in text:
        found.append("as it is")
    for decode in (urllib.parse.unquote, urllib.parse.unquote_plus):
        if secret in decode(text):
            found.append(f"by {decode.__name__}")
    for run in re.findall(r"[A-Za-z0-9+/=_-]{4,}", text):
        standard = run.replace("-", "+").replace("_", "/").replace("=", "")
        for offset in range(4):
            chunk = standard[offset:]
            chunk = chunk[:len(chunk) // 4 * 4]
            if chunk and raw in base64.b64decode(chunk):
                found.append(f"by base64 at offset {offset}")
    for run in re.findall(r"[0-9a-fA-F]{2,}", text):
        for offset in (0, 1):
            chunk = run[offset:]
            if raw in bytes.fromhex(chunk[:len(chunk) // 2 * 2]):
                found.append(f"by hex at offset {offset}")
    return found


def _printed(secret: str, before: bytes, after: bytes) -> str:
    """A log line printing ``secret`` as a worker or a library may: inside a longer base64 text (a
    ``user:secret`` pair, a JSON blob), URL-safe base64, percent-encoded in a URL, as hex."""
    raw = secret.encode()
    return (f"auth {base64.b64encode(before + raw + after).decode()} blob "
            f"{base64.urlsafe_b64encode(before + raw + after).decode().rstrip('=')} "
            f"url https://h/p?q={urllib.parse.quote(secret, safe='')}&r={urllib.parse.quote_plus(secret)} "
            f"hex {(before + raw + after).hex()} {raw.hex().upper()}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=SECRET, before=NOISE, after=NOISE)
def test_a_known_secrets_encoded_forms_are_masked(secret, before, after):
    line = _printed(secret, before, after)
    assert _recoverable(line, secret)  # the line does carry it
    clean = redact.scrub(line, redact.secret_values({"DB_PASSWORD": secret}))
    assert _recoverable(clean, secret) == [], clean


SHAPED = st.one_of(
    st.builds(lambda p, t: p + t, st.sampled_from(["ghp_", "gho_", "ghs_", "hf_"]),
              st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", min_size=36,
                      max_size=40)),
    st.builds(lambda t: "AKIA" + t, st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16)),
    st.builds(lambda t: "glpat-" + t, st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop0123456789_-",
                                              min_size=20, max_size=26)),
    st.builds(lambda t: "xoxb-" + t, st.text(alphabet="abcdefABCDEF0123456789-", min_size=20, max_size=40)),
    st.builds(lambda n: token_source.token_urlsafe(n).replace("-", "").replace("_", ""), st.integers(30, 48))
    .filter(credentials.looks_like_token),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=SHAPED, name=st.sampled_from(["BUILD_ARG", "X", "CI_VAR_7", "MLFLOW_RUN_NOTE", "UPLOAD_TARGET"]),
       before=NOISE, after=NOISE)
def test_a_secret_looking_value_is_masked_whatever_its_name(value, name, before, after):
    """The old net took only names with KEY, TOKEN, SECRET ... in them: none of these names has one."""
    assert credentials.looks_like_token(value), value
    env = {name: value, "HOME": "/root"}
    line = f"{name}={value} " + _printed(value, before, after)
    clean = redact.scrub(line, redact.secret_values(env))
    assert _recoverable(clean, value) == [], clean
    assert redact.scrub_env(env) == {name: redact.MASK, "HOME": "/root"}


ORDINARY = {  # values an environment holds that are not secrets: never masked by value
    "GITHUB_SHA": "317de0c" + "9f2a" * 8 + "1",  # a commit id: one letter case
    "ROSETTA_SWEEP": "20261203T132817Z-ac6edc", "RUN_DIR": "/srv/ci/rosetta/results/runs/20261203T132817Z-ac6edc",
    "INVOCATION_ID": "3f2a9c0e-1b2d-4c5e-8f90-123456789abc", "LANG": "en_US.UTF-8", "HOME": "/root",
    "PATH": "/work/main/.venv/bin:/usr/local/bin:/usr/bin", "NCCL_DEBUG": "WARN", "CUDA_VISIBLE_DEVICES": "0,1",
    "PYTEST_XDIST_WORKER": "gw1", "HOSTNAME": "ci-gpu-03.example.internal", "MODEL": "resnet50_v1.5",
    "JOB_NAME": "rosetta-nightly-torch_ddp-resnet50-large",
}


def test_ordinary_values_are_not_taken_for_secrets():
    assert [k for k, v in ORDINARY.items() if credentials.looks_like_token(v)] == []
    assert redact.secret_values(ORDINARY) == []
    assert redact.scrub_env(ORDINARY) == ORDINARY


def test_a_killed_runs_record_masks_the_encoded_forms_too(tmp_path, monkeypatch):
    """The kill-then-resume path (.secrets.json): the resuming shell has none of the run's variables, and
    the record it reads masks the secret's base64 and hex as well as the secret."""
    secret = token_source.token_hex(12) + "Q/x"
    monkeypatch.setenv("UPLOAD_PASSWORD", secret)
    redact.record_secrets(tmp_path)
    monkeypatch.delenv("UPLOAD_PASSWORD")
    line = _printed(secret, b"user:", b"")
    clean = redact.mask_recorded(line, redact.recorded_secrets(tmp_path))
    assert _recoverable(clean, secret) == [], clean
