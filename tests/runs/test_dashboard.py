"""rosetta dashboard: a static site from result stores, loaded in a real headless browser (Debian's chromium).

Two stores (a results folder and a table file, as two CI machines keep them) hold nine series built from
rows as `rosetta run` writes them: two regressions planted on the newest sweeps (one suspected, not failing
CI yet; one confirmed, failing it), an outlier, a step up, an old step down and a drift that must not be
listed as regressions, a series whose newest sweeps ran on a busy machine (its canary cannot see: blind)
and one that stopped ten days before the site's time (stale).
The pages are loaded in chromium, which runs their script, and the DOM it ends with is read back
(--dump-dom), so the filters are checked as a reader would see them.
"""

import html
import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main as cli
from harness.gate import history
from harness.results import table as results
from tests.helpers.history_rows import sweep_rows

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="the Debian package chromium is not installed "
                                                             "(tools/system-packages.txt)")
INJECTED = 'gpu-box<script>alert("x")</script>'  # a host name carrying markup: shown as text, never run


SLOW = 0.088  # s per step: 9% fewer images/s than 0.080
PLANTED = {  # config -> (its dimensions, its step times per sweep, what the dashboard must say)
    "steady": ({"framework": "torch_ddp", "workload": "resnet50"}, [0.080] * 12, "no change"),
    "suspected": ({"framework": "torch_ddp", "workload": "bert", "storage": "local"}, [0.080] * 11 + [SLOW],
                  "regression"),
    "confirmed": ({"framework": "tf_mwms", "workload": "resnet50"}, [0.080] * 10 + [SLOW] * 2, "regression"),
    "outlier": ({"framework": "tf_mwms", "workload": "bert", "strategy": "ps"},
                [0.080] * 5 + [0.080 / 0.85] + [0.080] * 14, "no change"),
    "faster": ({"framework": "horovod_torch", "workload": "resnet50"}, [SLOW] * 6 + [0.080] * 14, "no change"),
    "old-step": ({"framework": "horovod_torch", "workload": "bert", "storage": "nfs"}, [0.080] * 5 + [SLOW] * 7,
                 "no change"),
    "drift": ({"framework": "tf_mwms", "workload": "llama"}, [0.080 / 0.995 ** k for k in range(30)], "no change"),
    "busy-tail": ({"framework": "chainer", "workload": "resnet50"}, [0.080] * 16, "not judged"),
    "stopped": ({"framework": "chainer", "workload": "bert"}, [0.080] * 12, "no change"),
}
BUSY_TAIL = 8  # busy-tail's newest sweeps measured on a busy machine: where its canary is planted
AS_OF = "2026-11-03T00:00:00+00:00"  # the site's time: every series swept within two days of it but stopped


def _stores(root: Path) -> list[str]:
    """Two stores, as two CI machines keep them: m1's results folder, and the other host's table file."""
    rows: dict[str, list[dict]] = {"m1": [], INJECTED: []}
    for config, (dims, levels, _) in PLANTED.items():
        rng = random.Random(3)  # each series its own noise, the same draws as tests/unit/gate/test_history.py's
        host = INJECTED if config == "old-step" else "m1"
        for i, level in enumerate(levels):
            torch = "2.14.0" if config == "confirmed" and i >= 10 else "2.13.0"  # the cause, shown beside the step
            spread = 0.01 if config == "drift" else 0.02  # tests/unit/gate/test_history.py's drift
            sweep = sweep_rows(i, level, rng, config=config, host=host, torch=torch, spread=spread, **dims)
            if config == "busy-tail" and i >= len(levels) - BUSY_TAIL:
                sweep = [{**r, "machine_busy": True, "busy_note": "other processes used 55% of the CPUs"} for r in sweep]
            if config == "stopped":  # the same hours, ten days earlier
                sweep = [{**r, "timestamp": r["timestamp"].replace("2026-11-01", "2026-10-22")} for r in sweep]
            rows[host] += sweep
    results.append(root / "m1", rows["m1"])
    results.append(root / "other", rows[INJECTED])
    return [str(root / "m1"), str(root / "other" / results.PARQUET)]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("dashboard")
    stores = _stores(root)
    assert cli.main(["dashboard", *stores, "--out", str(root / "site"), "--as-of", AS_OF]) == 0
    return root, stores, root / "site"


def test_the_planted_verdicts_are_what_history_says(site):
    """The stores are what the test claims: history (the gate) finds exactly the planted regressions."""
    _, stores, _ = site
    verdicts = {s.config_id: s for s in history.series(history.load(stores))}
    assert {c: verdicts[c].verdict.verdict for c in PLANTED} == {c: want for c, (_, _, want) in PLANTED.items()}
    assert (verdicts["suspected"].verdict.status, verdicts["confirmed"].verdict.status) == ("suspected", "confirmed")
    assert not verdicts["suspected"].verdict.fails and verdicts["confirmed"].verdict.fails
    assert verdicts["steady"].steps == () and verdicts["steady"].outliers == ()
    assert verdicts["outlier"].outliers == ("s05",) and verdicts["outlier"].steps == ()
    assert [(st.direction, st.verdict) for st in verdicts["faster"].steps] == [("up", "confirmed")]
    assert [(st.direction, st.verdict) for st in verdicts["old-step"].steps] == [("down", "confirmed")]
    assert len(verdicts["drift"].trends) == 1 and [st.drift for st in verdicts["drift"].steps].count("") == 1


def test_the_site_is_self_contained_and_escapes_the_data(site):
    _, _, out = site
    files = sorted(p.name for p in out.iterdir())
    assert {"index.html", "regressions.html", "dashboard.css", "dashboard.js"} <= set(files)
    assert sum(name.startswith("series-") for name in files) == len(PLANTED)
    for page in out.iterdir():
        text = page.read_text()
        assert not re.search(r"(?:src|href)\s*=\s*[\"']?\s*(?:[a-z]+:|//)", text, re.I), page.name  # local only
        assert "@import" not in text and "url(" not in text, page.name
        assert "<script>alert" not in text, page.name
    assert html.escape(INJECTED) in (out / "index.html").read_text()


def _browser(profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless chromium with every way out to the network closed: no proxy, every host name unresolvable,
    no background, component or sync traffic; its own profile folder. Its network log is checked after
    each run (``_offline``)."""
    netlog = profile.parent / f"{profile.name}-netlog.json"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-proxy-server", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--disable-default-apps", "--host-resolver-rules=MAP * ~NOTFOUND",
               "--enable-logging=stderr", "--v=0",  # the pages' console messages on stderr (CONSOLE lines)
               f"--user-data-dir={profile}", f"--log-net-log={netlog}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    _offline(json.loads(netlog.read_text()))
    return done


def _offline(netlog: dict) -> None:
    """No page asked the network for anything (files load outside the network stack, so a page's request
    in this log is a fetch from elsewhere), and nothing left the machine: the requests chromium makes of
    its own accord (its updater, its accounts check; initiator "not an origin") failed to resolve, were
    cancelled or were still waiting when it quit; no connection was opened, no response read."""
    names = {number: name for name, number in netlog["constants"]["logEventTypes"].items()}
    requests: dict[int, dict] = {}
    for event in netlog["events"]:
        params, name = event.get("params", {}), names[event["type"]]
        assert name != "TCP_CONNECT" or "net_error" in params, f"a TCP connection was opened: {params}"
        assert name != "HTTP_TRANSACTION_READ_RESPONSE_HEADERS", f"a response was read: {params}"
        if name == "URL_REQUEST_START_JOB" and "url" in params:
            requests[event["source"]["id"]] = {"url": params["url"], "initiator": params.get("initiator")}
        if name == "REQUEST_ALIVE" and "net_error" in params and event["source"]["id"] in requests:
            requests[event["source"]["id"]]["error"] = params["net_error"]
    for request in requests.values():
        assert request["initiator"] == "not an origin", f"a page requested {request['url']}"
        # ERR_NAME_NOT_RESOLVED, ERR_ABORTED, or none: still resolving when chromium quit
        assert request.get("error", -105) in (-105, -3), f"chromium's own request was not stopped: {request}"


def _dom(tmp_path: Path, page: Path, fragment: str = "") -> str:
    return _browser(tmp_path / "profile", "--dump-dom", page.as_uri() + fragment).stdout


def _loaded(tmp_path: Path, page: Path) -> tuple[str, str]:
    """The DOM chromium ends with and what it logged (the page's console messages among it)."""
    done = _browser(tmp_path / "profile", "--dump-dom", page.as_uri())
    return done.stdout, done.stderr


def _listed(dom: str, table: str) -> list[str]:
    """Config ids of the rows the page shows (not hidden by its script) in one table."""
    body = re.search(rf'<table id="{table}">(.*?)</table>', dom, re.S).group(1)
    rows = re.findall(r"<tr data-series([^>]*)>(.*?)</tr>", body, re.S)
    return sorted(re.search(r'data-config="([^"]*)"', attrs).group(1) for attrs, _ in rows if " hidden" not in attrs)


@needs_chromium
def test_regressions_page_lists_exactly_the_planted_regressions(site, tmp_path):
    _, _, out = site
    dom = _dom(tmp_path, out / "regressions.html")
    assert 'data-filtered="yes"' in dom  # the script ran
    assert _listed(dom, "regressions") == ["confirmed"]  # failing CI on the newest sweep
    assert _listed(dom, "suspected") == ["suspected"]  # departing, not failing yet
    # old steps down (the drift's first); the step up, the outlier and the drift's later steps are not listed
    assert _listed(dom, "past") == ["drift", "old-step"]
    assert "torch 2.13.0 -&gt; 2.14.0" in dom  # the provenance beside the confirmed step
    assert "<script>alert" not in dom and html.escape(INJECTED, quote=False) in dom


@needs_chromium
@pytest.mark.parametrize("fragment,shown", [
    ("", sorted(PLANTED)),
    ("#framework=tf_mwms", ["confirmed", "drift", "outlier"]),
    ("?workload=bert&framework=torch_ddp", ["suspected"]),
    ("#verdict=regression", ["confirmed", "suspected"]),
    ("#storage=nfs", ["old-step"]),
    ("#framework=mxnet", []),  # a value no series has: none shown
    ("#canary=blind", ["busy-tail"]),  # its planted steps fell on busy sweeps: its gate could not see them
    ("#canary=seen", ["confirmed", "drift", "faster", "old-step", "outlier", "steady", "stopped", "suspected"]),
    ("#freshness=stale", ["stopped"]),
])
def test_index_filters_run_in_the_browser(site, tmp_path, fragment, shown):
    _, _, out = site
    dom = _dom(tmp_path, out / "index.html", fragment)
    assert _listed(dom, "series") == shown
    assert f"{len(shown)} of {len(PLANTED)} series shown" in dom


@needs_chromium
def test_a_series_page_shows_its_step_and_its_cause_and_a_screenshot_is_kept(site, tmp_path):
    root, _, out = site
    index = _dom(tmp_path, out / "index.html")
    page = re.search(r'data-config="confirmed"[^>]*><td><a href="(series-\w+\.html)"', index).group(1)
    dom = _dom(tmp_path, out / page)
    assert re.search(r'<line class="step confirmed down"', dom) and 'class="level"' in dom
    assert "torch 2.13.0 -&gt; 2.14.0" in dom and "s10" in dom
    drift = re.search(r'data-config="drift"[^>]*><td><a href="(series-\w+\.html)"', index).group(1)
    dom = _dom(tmp_path, out / drift)
    assert 'class="trend"' in dom and re.search(r"trend -0\.[3-7]\d%/sweep", dom)
    assert len(re.findall(r'<line class="step confirmed down"', dom)) == 1  # the drift's start; its stairs are the trend's
    for name, target in (("index", out / "index.html"), ("series", out / page)):
        shot = root / f"screenshot-{name}.png"
        _browser(tmp_path / f"profile-{name}", f"--screenshot={shot}", "--window-size=1400,1000", target.as_uri())
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
        shutil.copy(shot, f"/tmp/dashboard-screenshot{'' if name == 'index' else '-series'}.png")


@needs_chromium
def test_the_canary_and_staleness_are_shown_where_a_reader_looks(site, tmp_path):
    """The index flags the stale series and each series' canary; their pages say what the canary planted and
    saw, and since when a series has had no sweep."""
    _, _, out = site
    index = _dom(tmp_path, out / "index.html")
    rows = dict(re.findall(r'<tr data-series[^>]*data-config="([^"]*)"[^>]*>(.*?)</tr>', index, re.S))
    assert re.search(r'class="stale">stale: 1[0-2] days<', rows["stopped"])
    assert not any('class="stale"' in row for config, row in rows.items() if config != "stopped")
    assert re.search(r'class="canary regression"[^>]*>blind<', rows["busy-tail"])
    assert re.search(r'class="canary improvement"[^>]*>seen<', rows["steady"])
    assert re.search(r'<td class="num">-\d\.\d%</td>', rows["steady"])  # its minimum detectable effect
    pages = {c: re.search(r'<a href="(series-\w+\.html)"', row).group(1) for c, row in rows.items()}
    blind = _dom(tmp_path, out / pages["busy-tail"])
    power = re.search(r'<p id="power">(.*?)</p>', blind, re.S).group(1)
    assert "blind: a planted step of -" in power and "were not judged (busy or nothing measured)" in power
    stale = _dom(tmp_path, out / pages["stopped"])
    assert re.search(r'<p class="stale" id="stale">stale: no new sweep for 1[0-2] days</p>', stale)
    steady = _dom(tmp_path, out / pages["steady"])
    assert re.search(r"was seen at [2-5] of 5 places", steady) and 'id="stale"' not in steady


@needs_chromium
def test_the_network_check_catches_a_page_that_fetches_from_elsewhere(tmp_path):
    """The check above can fail: a page with an image from a web address is caught."""
    page = tmp_path / "fetching.html"
    page.write_text('<!DOCTYPE html><html><body><img src="https://example.com/x.png"></body></html>')
    with pytest.raises(AssertionError, match="a page requested https://example.com/x.png"):
        _browser(tmp_path / "profile", "--dump-dom", page.as_uri())


def test_a_second_run_into_the_same_folder_leaves_no_page_of_a_series_it_lacks(site, tmp_path):
    _, stores, _ = site
    out = tmp_path / "site"
    assert cli.main(["dashboard", *stores, "--out", str(out)]) == 0
    assert cli.main(["dashboard", *stores, "--out", str(out), "--host", "m1"]) == 0
    assert len(list(out.glob("series-*.html"))) == len(PLANTED) - 1  # old-step is on another host
    assert INJECTED not in (out / "index.html").read_text() and "m1 (cpu, 2 cores)" in (out / "index.html").read_text()


def test_bad_input_is_one_line_and_exit_2(site, tmp_path, capsys):
    _, [store, _], _ = site
    assert cli.main(["dashboard", str(tmp_path / "missing")]) == 2
    assert cli.main(["dashboard", str(store), "--last", "2"]) == 2
    (tmp_path / "file").write_text("")
    assert cli.main(["dashboard", str(store), "--out", str(tmp_path / "file")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(e.startswith("rosetta: error: ") for e in errors)


# Issue 52: every string column of a hostile table carries a script that would mark the page and write to
# the console if it ran (two signs read back independently: the DOM chromium ends with, its console log)
MARKER = "PWNED-7f3a"
PWNED = f"document.documentElement.setAttribute('data-pwned','1');console.error('{MARKER}')"
HOSTILE_STRINGS = (f"<script>{PWNED}</script>", f'<img src=x onerror="{PWNED}">', f"\"><svg onload=\"{PWNED}\">",
                   f"'><body onload=\"{PWNED}\">")


def _ran(dom: str, log: str) -> list[str]:
    """The signs that a hostile value's script ran in a page."""
    return [sign for sign, seen in (("the page marked", re.search(r"<html[^>]*data-pwned", dom)),
                                    ("the console written", MARKER in log)) if seen]


@needs_chromium
@pytest.mark.parametrize("hostile", HOSTILE_STRINGS)
def test_the_check_sees_a_hostile_value_that_is_not_escaped(tmp_path, hostile):
    """The check below can fail: each hostile value written into a page as it is runs, and both signs show it
    (a page title and an attribute in double and in single quotes, as the dashboard's pages have them)."""
    page = tmp_path / "raw.html"
    page.write_text(f'<!DOCTYPE html><html><head><title>{hostile}</title></head><body>'
                    f'<p title="{hostile}">{hostile}</p><p title=\'{hostile}\'>x</p></body></html>')
    assert _ran(*_loaded(tmp_path, page)) == ["the page marked", "the console written"]


@needs_chromium
def test_a_page_built_from_a_hostile_table_runs_no_script_of_it(tmp_path):
    rows, rng = [], random.Random(5)
    for i in range(8):
        for k, bad in enumerate(HOSTILE_STRINGS):
            sweep = sweep_rows(i, 0.080 if i < 6 else SLOW, rng, config=f"c{k}", host=bad, framework=bad,
                               workload=bad, storage=bad, strategy=bad)
            rows += [{**r, "sample_unit": bad, "framework_version": bad} for r in sweep]
    results.append(tmp_path / "store", rows)
    out = tmp_path / "site"
    assert cli.main(["dashboard", str(tmp_path / "store"), "--out", str(out), "--as-of", AS_OF]) == 0
    pages = sorted(out.glob("*.html"))
    assert len(pages) == 2 + len(HOSTILE_STRINGS)
    for page in pages:
        dom, log = _loaded(tmp_path, page)
        assert 'data-filtered="yes"' in dom or page.name.startswith("series-"), page.name  # the page's own script ran
        assert _ran(dom, log) == [], page.name  # the data's did not
        assert "&lt;" in dom, page.name  # the data is shown, as text
