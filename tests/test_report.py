"""powerfs-report: the journal reader and its three outputs.

Every test writes a synthetic journal (by hand, event by event, so that the
expected intervals and figures are known by construction; or with
scripts/gen-journal, whose --truth file lists what it simulated), runs the
built ./powerfs-report as a user would, and checks its output exactly: the
bars of the HTML timeline (parsed as XML), the slices of the Chrome trace
(loaded as JSON), the figures of the text summary.  One test renders the HTML
in headless Chromium and decodes the screenshot; one measures 1,000,000
events.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"
GEN = REPO / "scripts" / "gen-journal"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def report_cmd():
    exe = os.environ.get("POWERFS_REPORT") or str(REPO / "powerfs-report")
    if os.access(exe, os.X_OK):
        return [exe]
    return [PYTHON, str(REPO / "src" / "powerfs-report.py")]


def run_report(*args, check=True, timeout=120):
    env = dict(os.environ, TZ="UTC")
    r = subprocess.run(report_cmd() + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout, env=env)
    assert "Traceback" not in r.stderr, r.stderr
    if check:
        assert r.returncode == 0, r.stderr
    return r


# ---------------------------------------------------------------------------
# A journal written event by event, with consistent clocks: CLOCK_MONOTONIC
# (t) moves only while the host is awake; the wall clock also moves while it
# sleeps.  Times are given in milliseconds of monotonic time since the boot's
# base.

W0 = 1_700_000_000_123_456          # wall us of the first event


class Journal:
    def __init__(self):
        self.lines = []
        self.base_t = 5_000_000
        self.off = W0 - self.base_t  # wall = t + off
        self.t = self.base_t

    def at(self, ms):
        self.t = self.base_t + int(ms * 1000)
        return self

    @property
    def wall(self):
        return self.t + self.off

    def wall_at(self, ms):
        return self.base_t + int(ms * 1000) + self.off

    def ev(self, ev, **fields):
        d = {"t": self.t, "wall": self.wall, "ev": ev}
        d.update(fields)
        self.lines.append(json.dumps(d))
        return (self.t, self.wall)

    def reboot(self, gap_ms, new_base_t):
        """A new boot: wall moves on by gap_ms, monotonic starts again."""
        wall = self.wall + gap_ms * 1000
        self.base_t = new_base_t
        self.t = new_base_t
        self.off = wall - new_base_t

    def suspend(self, start_ms, entry_ms, slept_ms, exit_ms, **fields):
        """A successful suspend: entry and exit take monotonic time, the
        sleep only wall time.  Returns its wall interval."""
        self.at(start_ms)
        t0, w0 = self.t, self.wall
        self.t += entry_ms * 1000
        self.off += slept_ms * 1000
        self.t += exit_ms * 1000
        rec = dict(state="mem", by="autosleep", start=t0, end=self.t,
                   start_wall=w0, end_wall=self.wall, result=0, step="",
                   active=[], signalled=[])
        rec.update(fields)
        self.ev("suspend", **rec)
        return w0, self.wall

    def logind_sleep(self, start_ms, entry_ms, slept_ms):
        self.at(start_ms)
        t0, w0 = self.t, self.wall
        self.t += entry_ms * 1000
        self.off += slept_ms * 1000
        self.ev("sleep", start=t0, end=self.t, start_wall=w0, end_wall=self.wall)
        return w0, self.wall

    def write(self, path, lines=None):
        Path(path).write_text("\n".join(self.lines if lines is None else lines)
                              + "\n", encoding="utf-8")
        return path


HOST = {"pid": 100, "uid": 1000}
PHONE = {"pid": 0, "uid": 1001, "cgroup": "/lxc/phone", "pidns": 4026532100}
BAD_NAME_HEX = "626164fffe"            # b"bad\xff\xfe"
BAD_NAME = "bad\ufffd\ufffd"
BAD_LABEL = "bad\\xff\\xfe"              # how the report shows its bytes


def label_of(name, key):
    """The report's label of a gen-journal source (key: its name, or its
    bytes in hexadecimal): bytes that are not UTF-8 as \\xNN."""
    if key == name:
        return name
    return bytes.fromhex(key).decode("utf-8", "backslashreplace")


def day():
    """Two boots of a small, fully known history.  Returns the journal and
    what it should show: {source label: [(wall0, wall1, mono_us, flags)]},
    the suspended periods, autosleep periods and figures."""
    j = Journal()
    x = {"src": {}, "sleeps": [], "autosleep": {"mem": [], "freeze": []}}

    def iv(name, a, b, mono, open_end=False):
        x["src"].setdefault(name, []).append((a, b, mono, open_end))

    # Boot A.
    j.at(0).ev("start", version="0.2.0", boot_id="A", backend="simulate",
               states="freeze mem disk")
    as_a = j.at(0).ev("autosleep", state="mem", pid=1, uid=0)[1]
    r1 = j.at(1000).ev("lock", src="radio", timeout_ms=0, created=True,
                       was_active=False, **HOST)[1]
    g1 = j.at(1500).ev("lock", src="gps", timeout_ms=2000, created=True,
                       was_active=False, **PHONE)[1]
    g2 = j.at(3500).ev("expire", src="gps")[1]
    iv("gps", g1, g2, 2000_000)
    r2 = j.at(4000).ev("unlock", src="radio", was_active=True, **HOST)[1]
    iv("radio", r1, r2, 3000_000)
    j.at(4100).ev("count_read", count=5, pid=1, uid=0)
    j.at(4150).ev("count_write", count=5, result=0, pid=1, uid=0)
    x["sleeps"].append(j.suspend(4200, 50, 60_000, 30))     # ends at t=4280
    r1 = j.at(4300).ev("lock", src="radio", timeout_ms=0, created=False,
                       was_active=False, **HOST)[1]
    b1 = j.at(4400).ev("lock", src=BAD_NAME, src_hex=BAD_NAME_HEX, timeout_ms=0,
                       created=True, was_active=False, pid=7, uid=1002)[1]
    # A future powerfs's event and fields: ignored.
    j.at(4500).ev("frobnicate", src="radio", extra={"a": [1, 2]})
    j.at(4600).ev("lock", src="radio", timeout_ms=0, created=False,
                  was_active=True, future_field=[1], **HOST)
    b2 = j.at(5400).ev("unlock", src=BAD_NAME, src_hex=BAD_NAME_HEX,
                       was_active=True, pid=7, uid=1002)[1]
    iv(BAD_LABEL, b1, b2, 1000_000)
    r2 = j.at(6000).ev("unlock", src="radio", was_active=True, **HOST)[1]
    iv("radio", r1, r2, 1700_000)
    # A failed suspend: alarm locks while it freezes.
    j.at(6100)
    fail_t0, fail_w0 = j.t, j.wall
    a1 = j.at(6120).ev("lock", src="alarm", timeout_ms=1000, created=True,
                       was_active=False, **PHONE)[1]
    fail_w1 = j.at(6150).ev("suspend", state="mem", by="autosleep", start=fail_t0,
                            end=j.t, start_wall=fail_w0, end_wall=j.wall,
                            result=-16, step="freeze", active=["alarm"],
                            signalled=["alarm"])[1]
    x["failed"] = fail_w1
    a2 = j.at(7120).ev("expire", src="alarm")[1]
    iv("alarm", a1, a2, 1000_000)
    as_a_off = j.at(8000).ev("autosleep", state="off", pid=1, uid=0)[1]
    x["autosleep"]["mem"].append((as_a, as_a_off))
    w1 = j.at(9000).ev("lock", src="wifi", timeout_ms=0, created=True,
                       was_active=False, **HOST)[1]
    u1 = j.at(10000).ev("lock", src="audio", timeout_ms=0, created=True,
                        was_active=False, **HOST)[1]
    u2 = j.at(11000).ev("unlock", src="audio", was_active=True, **HOST)[1]
    iv("audio", u1, u2, 1000_000)
    j.at(12000).ev("unlock", src="ghost", was_active=False, **HOST)
    as_a2 = j.at(13000).ev("autosleep", state="mem", pid=1, uid=0)[1]
    j.at(14000).ev("count_write", count=3, result=-16, pid=1, uid=0)
    stop = j.at(15000).ev("stop")[1]
    iv("wifi", w1, stop, 6000_000)
    x["autosleep"]["mem"].append((as_a2, stop))
    x["nodata"] = [stop]
    # Boot B, 20 s later.
    j.reboot(20_000, 2_000_000)
    start_b = j.at(0).ev("start", version="0.2.0", boot_id="B",
                         backend="simulate", states="freeze mem disk")[1]
    x["nodata"].append(start_b)
    as_b = j.at(0).ev("autosleep", state="freeze", pid=1, uid=0)[1]
    r1 = j.at(500).ev("lock", src="radio", timeout_ms=0, created=True,
                      was_active=False, **HOST)[1]
    x["sleeps"].append(j.logind_sleep(2500, 10, 30_000))     # ends at t=2510
    r2 = j.at(4500).ev("unlock", src="radio", was_active=True, **HOST)[1]
    iv("radio", r1, r2, 4000_000)
    g1 = j.at(5000).ev("lock", src="gps", timeout_ms=0, created=True,
                       was_active=False, **PHONE)[1]
    end = j.at(6000).ev("count_read", count=9, pid=1, uid=0)[1]
    iv("gps", g1, end, 1000_000, open_end=True)
    x["autosleep"]["freeze"].append((as_b, end))
    x["start"], x["end"] = W0, end
    return j, x


def svg_of(html_text):
    """The timeline, parsed as XML."""
    m = re.search(r"<svg\b.*</svg>", html_text, re.S)
    assert m, "no <svg> in the page"
    return ET.fromstring(m.group(0))


NS = "{http://www.w3.org/2000/svg}"


def bars_by_source(svg):
    out = {}
    for g in svg.iter(NS + "g"):
        if g.get("class") == "src":
            out[g.get("data-src")] = [r for r in g if r.tag == NS + "rect"]
    return out


def ms(attr):
    """A data-*-ms attribute (exact milliseconds) as integer microseconds."""
    whole, _, frac = attr.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def check_x(svg, el, start_us):
    """The bar is drawn where its data says (to half a pixel)."""
    lo, hi = ms(svg.get("data-start-ms")), ms(svg.get("data-end-ms"))
    px, pw = float(svg.get("data-plot-x")), float(svg.get("data-plot-w"))
    want = px + (start_us - lo) * pw / (hi - lo)
    assert abs(float(el.get("x")) - want) <= 0.5, (el.attrib, want)


# ---------------------------------------------------------------------------
# HTML

def test_html_bars_are_the_journal_intervals(tmp_path):
    j, x = day()
    path = j.write(tmp_path / "journal")
    run_report(f"--html={tmp_path / 'r.html'}", path)
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page), \
        "the page must not load anything"
    svg = svg_of(page)
    assert ms(svg.get("data-start-ms")) == x["start"]
    assert ms(svg.get("data-end-ms")) == x["end"]
    bars = bars_by_source(svg)
    assert set(bars) == set(x["src"]), bars.keys()
    for name, want in x["src"].items():
        got = bars[name]
        assert len(got) == len(want), name
        for el, (a, b, _, open_end) in zip(got, want):
            assert el.get("data-merged") is None
            # Exact to the microsecond (the brief asks for 1 ms).
            assert ms(el.get("data-start-ms")) == a, (name, el.attrib)
            assert ms(el.get("data-end-ms")) == b, (name, el.attrib)
            assert (el.get("data-open-end") == "1") == open_end
            check_x(svg, el, a)
            width = (b - a) * float(svg.get("data-plot-w")) / (x["end"] - x["start"])
            assert abs(float(el.get("width")) - max(1.0, width)) <= 0.5
    # Rows in order of prevent-suspend time.
    order = [g.get("data-src") for g in svg.iter(NS + "g") if g.get("class") == "src"]
    assert order[:3] == ["radio", "gps", "wifi"]
    # Suspended periods, shaded.
    shades = [r for r in svg.iter(NS + "rect") if r.get("class") == "shade"]
    assert [(ms(r.get("data-start-ms")), ms(r.get("data-end-ms"))) for r in shades] \
        == x["sleeps"]
    # Autosleep on, by state.
    for g in svg.iter(NS + "g"):
        if g.get("class") == "as":
            got = [(ms(r.get("data-start-ms")), ms(r.get("data-end-ms"))) for r in g]
            assert got == x["autosleep"][g.get("data-state")]
    # powerfs not running between the boots.
    nodata = [r for r in svg.iter(NS + "rect") if r.get("class") == "nodata"]
    assert [(ms(r.get("data-start-ms")), ms(r.get("data-end-ms"))) for r in nodata] \
        == [tuple(x["nodata"])]
    # The failed suspend names alarm, on hover and as a label.
    fails = [p for p in svg.iter(NS + "path") if p.get("class") == "fail"]
    assert len(fails) == 1
    assert ms(fails[0].get("data-end-ms")) == x["failed"]
    assert fails[0].get("data-blocking") == "alarm"
    title = fails[0].find(NS + "title").text
    assert "wakeup event: alarm" in title and "EBUSY" not in title
    labels = [t.text for t in svg.iter(NS + "text") if t.get("class") == "flabel"]
    assert labels == ["alarm"]
    # The tables: top sources by prevent-suspend and by active time.
    tables = dict(re.findall(r'<table data-table="(\w+)">(.*?)</table>', page, re.S))
    rows = re.findall(r"<tr><td class=\"n\">\d+</td><td>([^<]*)</td>"
                      r"<td class=\"n\">(?:<b>)?([^<]*)(?:</b>)?</td>"
                      r"<td class=\"n\">(?:<b>)?([^<]*)(?:</b>)?</td>", tables["prevent"])
    assert rows[:3] == [("radio", "8.700s", "8.700s"), ("gps", "3.000s", "3.000s"),
                        ("wifi", "6.000s", "2.000s")]
    names = re.findall(r"<tr><td class=\"n\">\d+</td><td>([^<]*)</td>", tables["active"])
    assert names[:3] == ["radio", "wifi", "gps"]
    assert "audio" not in re.findall(r"<td>([^<]*)</td>", tables["prevent"])


@pytest.mark.timeout(300)
def test_html_stays_light_with_many_sources(tmp_path):
    """1,000 sources over 24 hours: merged bars, a capped number of rows and
    an explicit "N more sources" line, under 20,000 SVG elements; every
    simulated interval of a drawn source lies inside one of its bars."""
    jpath, truth = tmp_path / "j", tmp_path / "truth.json"
    subprocess.run([PYTHON, str(GEN), "--sources=1000", "--duration=24h",
                    "--events=150000", "--seed=7", f"--truth={truth}", str(jpath)],
                   check=True, capture_output=True, timeout=120)
    run_report(f"--html={tmp_path / 'r.html'}", jpath)
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    svg = svg_of(page)
    n_elements = sum(1 for _ in svg.iter()) - 1
    assert n_elements <= 20000, n_elements
    assert len(page) < 4_000_000
    truth = json.loads(truth.read_text())
    bars = bars_by_source(svg)
    assert len(bars) == 100
    more = [t for t in svg.iter(NS + "text") if t.get("data-more")]
    n_active = sum(1 for s in truth["sources"].values() if s["intervals"])
    assert int(more[0].get("data-more")) == n_active - 100
    assert more[0].text == f"{n_active - 100} more sources"
    merged = 0
    px_us = (ms(svg.get("data-end-ms")) - ms(svg.get("data-start-ms"))) / \
        float(svg.get("data-plot-w"))
    labels = {}
    for key, s in truth["sources"].items():
        label = label_of(s["name"], key)
        labels[label] = s["intervals"]
    for name, rects in bars.items():
        spans = [(ms(r.get("data-start-ms")), ms(r.get("data-end-ms")),
                  int(r.get("data-merged") or 1)) for r in rects]
        merged += sum(1 for s in spans if s[2] > 1)
        inside = [0] * len(spans)
        k = 0
        for a, b, *_ in labels[name]:
            while k < len(spans) and spans[k][1] < b - 1000:
                k += 1
            assert k < len(spans) and spans[k][0] - 1000 <= a and b <= spans[k][1] + 1000, \
                (name, a, b)
            inside[k] += 1
        assert inside == [s[2] for s in spans], name
        # Bars are merge_px apart at least, and a merged bar has no gap that
        # wide inside it.
        gap = float(svg.get("data-merge-px")) * px_us
        for (a0, b0, _), (a1, b1, _) in zip(spans, spans[1:]):
            assert a1 - b0 >= gap - 1, (name, b0, a1)
        ivs = labels[name]
        for (a, b, *_), (c, d, *_) in zip(ivs, ivs[1:]):
            same = any(x0 - 1000 <= a and d <= x1 + 1000 for x0, x1, _ in spans)
            assert same == (c - b < gap), (name, b, c)
    assert merged > 0
    assert float(svg.get("data-merge-px")) >= 1


def test_html_of_generated_day_matches_the_simulation(tmp_path):
    """A gen-journal day of 10 sources: bars are the simulated intervals,
    merged only where less than a pixel apart."""
    jpath, truth = tmp_path / "j", tmp_path / "truth.json"
    subprocess.run([PYTHON, str(GEN), "--seed=5", f"--truth={truth}", str(jpath)],
                   check=True, capture_output=True, timeout=60)
    run_report(f"--html={tmp_path / 'r.html'}", jpath)
    svg = svg_of((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert sum(1 for _ in svg.iter()) < 2000
    truth = json.loads(truth.read_text())
    bars = bars_by_source(svg)
    px_us = (ms(svg.get("data-end-ms")) - ms(svg.get("data-start-ms"))) / \
        float(svg.get("data-plot-w"))
    assert set(bars) == {s["name"] for s in truth["sources"].values()}
    exact = 0
    for s in truth["sources"].values():
        spans = [(ms(r.get("data-start-ms")), ms(r.get("data-end-ms")),
                  int(r.get("data-merged") or 1)) for r in bars[s["name"]]]
        k = 0
        count = [0] * len(spans)
        for a, b, *_ in s["intervals"]:
            while spans[k][1] < b - 1000:
                k += 1
            assert spans[k][0] - 1000 <= a and b <= spans[k][1] + 1000
            count[k] += 1
            if spans[k][2] == 1:
                assert abs(spans[k][0] - a) <= 1000 and abs(spans[k][1] - b) <= 1000
                exact += 1
        assert count == [sp[2] for sp in spans]
        gap = float(svg.get("data-merge-px")) * px_us
        ivs = s["intervals"]
        for (a, b, *_), (c, d, *_) in zip(ivs, ivs[1:]):
            same = any(x0 - 1000 <= a and d <= x1 + 1000 for x0, x1, _ in spans)
            assert same == (c - b < gap), (s["name"], b, c)
    assert float(svg.get("data-merge-px")) == 1
    assert exact > 100
    shades = [(ms(r.get("data-start-ms")), ms(r.get("data-end-ms")))
              for r in svg.iter(NS + "rect") if r.get("class") == "shade"]
    sleeps = sorted(truth["suspended"] + truth["sleep"])
    assert len(shades) <= len(sleeps)
    for a, b, *_ in sleeps:
        assert any(x0 - 1000 <= a and b <= x1 + 1000 for x0, x1 in shades)


# ---------------------------------------------------------------------------
# Chrome trace

def load_trace(path):
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc["displayTimeUnit"] in ("ms", "ns")
    threads = {}
    for e in doc["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"]
        assert e["ph"] in ("X", "i", "C", "M"), e
        assert type(e["pid"]) is int
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index",
                                 "process_labels")
            assert isinstance(e["args"], dict)
            if e["name"] == "thread_name":
                assert e["tid"] not in threads
                threads[e["tid"]] = e["args"]["name"]
            continue
        assert type(e["ts"]) in (int, float) and e["ts"] >= 0
        if e["ph"] == "X":
            assert type(e["tid"]) is int
            assert type(e["dur"]) in (int, float) and e["dur"] >= 0
        elif e["ph"] == "i":
            assert e["s"] in ("t", "p", "g") and type(e["tid"]) is int
        elif e["ph"] == "C":
            assert e["args"] and all(type(v) in (int, float) for v in e["args"].values())
    return doc, threads


def test_trace_slices_are_the_journal_intervals(tmp_path):
    j, x = day()
    path = j.write(tmp_path / "journal")
    run_report(f"--trace={tmp_path / 't.json'}", path)
    doc, threads = load_trace(tmp_path / "t.json")
    base = doc["otherData"]["wall_start_us"]
    assert base == x["start"]
    by_tid = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            by_tid.setdefault(e["tid"], []).append(e)
    tids = {name: tid for tid, name in threads.items()}
    assert set(x["src"]) <= set(tids)
    for name, want in x["src"].items():
        got = by_tid[tids[name]]
        assert [(e["ts"] + base, e["ts"] + base + e["dur"]) for e in got] == \
            [(a, b) for a, b, _, _ in want], name
        assert all(e["name"] == name for e in got)
        assert [bool(e.get("args", {}).get("open_end")) for e in got] == \
            [o for *_, o in want]
    got = by_tid[tids["suspended"]]
    assert [(e["ts"] + base, e["ts"] + base + e["dur"]) for e in got] == x["sleeps"]
    got = by_tid[tids["autosleep"]]
    assert sorted((e["ts"] + base, e["ts"] + base + e["dur"]) for e in got) == \
        sorted(x["autosleep"]["mem"] + x["autosleep"]["freeze"])
    inst = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert len(inst) == 1
    assert inst[0]["tid"] == tids["suspended"] and inst[0]["ts"] + base == x["failed"]
    assert inst[0]["args"]["step"] == "freeze"
    assert inst[0]["args"]["errno"] == "EBUSY" and inst[0]["args"]["result"] == -16
    assert inst[0]["args"]["blocking"] == ["alarm"]
    # The counter is the number of sources active at each of its samples.
    spans = [(a, b) for want in x["src"].values() for a, b, _, _ in want]
    counts = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert len(counts) >= 2 * len(spans) - 2
    for e in counts:
        w = e["ts"] + base
        assert e["args"]["active"] == sum(1 for a, b in spans if a <= w < b), w
    assert max(e["args"]["active"] for e in counts) == 2


def test_trace_of_generated_journal_has_every_interval(tmp_path):
    jpath, truth = tmp_path / "j", tmp_path / "truth.json"
    subprocess.run([PYTHON, str(GEN), "--sources=50", "--duration=2h",
                    "--events=20000", "--seed=3", f"--truth={truth}", str(jpath)],
                   check=True, capture_output=True, timeout=60)
    run_report(f"--trace={tmp_path / 't.json'}", jpath)
    doc, threads = load_trace(tmp_path / "t.json")
    base = doc["otherData"]["wall_start_us"]
    truth = json.loads(truth.read_text())
    tids = {name: tid for tid, name in threads.items()}
    slices = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e.get("cat") == "wakelock":
            slices.setdefault(e["tid"], []).append((e["ts"] + base, e["ts"] + base + e["dur"]))
    for key, s in truth["sources"].items():
        label = label_of(s["name"], key)
        assert slices[tids[label]] == [(a, b) for a, b, *_ in s["intervals"]], label
    fails = [e for e in doc["traceEvents"] if e["ph"] == "i" and e["name"].startswith("suspend failed")]
    assert [e["ts"] + base for e in fails] == [f[0] for f in truth["failed"]]
    for e, f in zip(fails, truth["failed"]):
        assert e["args"]["result"] == f[2] and e["args"]["blocking"] == f[3]


# ---------------------------------------------------------------------------
# Text

def norm(text):
    return [" ".join(line.split()) for line in text.splitlines()]


def test_text_summary_figures(tmp_path):
    j, _ = day()
    path = j.write(tmp_path / "journal")
    lines = norm(run_report("--text", path).stdout)
    # Awake: 15 s of boot A + 6 s of boot B, less the 80 ms and 10 ms of
    # monotonic time inside the suspend and the sleep; suspended: 60.080 s +
    # 30.010 s of wall time; no data: the 20 s between the boots.
    assert "awake 20.910s 18.8%" in lines
    assert "suspended 1m30.090s 81.2% (1 suspends, 1 sleeps by others)" in lines
    assert "no data 20.000s (powerfs not running)" in lines
    assert "autosleep on 16.000s" in lines
    i = lines.index("Top sources by prevent-suspend time (active while autosleep was on)")
    assert lines[i + 1:i + 7] == [
        "1. radio 8.700s 41.6% 3 activations, longest 4.000s, host uid 1000",
        "2. gps 3.000s 14.3% 2 activations, longest 2.000s, /lxc/phone uid 1001",
        "3. wifi 2.000s 9.6% 1 activations, longest 6.000s, host uid 1000",
        "4. alarm 1.000s 4.8% 1 activations, longest 1.000s, /lxc/phone uid 1001",
        f"5. {BAD_LABEL} 1.000s 4.8% 1 activations, longest 1.000s, host uid 1002",
        "",
    ]
    i = lines.index("Top sources by active time")
    assert lines[i + 1:i + 8] == [
        "1. radio 8.700s 41.6% 3 activations, longest 4.000s, host uid 1000",
        "2. wifi 6.000s 28.7% 1 activations, longest 6.000s, host uid 1000",
        "3. gps 3.000s 14.3% 2 activations, longest 2.000s, /lxc/phone uid 1001",
        "4. alarm 1.000s 4.8% 1 activations, longest 1.000s, /lxc/phone uid 1001",
        "5. audio 1.000s 4.8% 1 activations, longest 1.000s, host uid 1000",
        f"6. {BAD_LABEL} 1.000s 4.8% 1 activations, longest 1.000s, host uid 1002",
        "",
    ]
    i = lines.index("Failed suspends: 1 of 2 attempts")
    assert lines[i + 1] == "1 wakeup event: alarm"
    assert lines[i + 3].endswith("autosleep wakeup event: alarm")
    assert "wakeup_count writes refused: 1" in lines


def test_top_limits_the_tables(tmp_path):
    j, _ = day()
    path = j.write(tmp_path / "journal")
    lines = norm(run_report("--text", "--top=2", path).stdout)
    i = lines.index("Top sources by active time")
    assert lines[i + 1].startswith("1. radio 8.700s")
    assert lines[i + 2].startswith("2. wifi 6.000s")
    assert lines[i + 3] == "... 4 more"


def test_since_keeps_the_last_part(tmp_path):
    j, x = day()
    path = j.write(tmp_path / "journal")
    # The last 35 s: boot B from its 1000th ms (wall): radio 1000..4500 ms of
    # monotonic time (the logind sleep in between does not count), gps the
    # last second; autosleep (freeze) 5 s; suspended the whole 30.010 s sleep.
    lines = norm(run_report("--text", "--since=35s", path).stdout)
    assert lines[0].endswith("(35.000s), last 35.000s")
    assert "awake 4.990s 14.3%" in lines
    assert "suspended 30.010s 85.7% (0 suspends, 1 sleeps by others)" in lines
    assert "autosleep on 5.000s" in lines
    i = lines.index("Top sources by active time")
    assert lines[i + 1].startswith("1. radio 3.500s")
    assert lines[i + 2].startswith("2. gps 1.000s")
    assert lines[i + 3] == ""
    assert "Failed suspends: 0 of 0 attempts" in lines
    # The same window in the HTML: radio's bar starts at the window.
    run_report(f"--html={tmp_path / 'r.html'}", "--since=35s", path)
    svg = svg_of((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert ms(svg.get("data-start-ms")) == x["end"] - 35_000_000
    bars = bars_by_source(svg)
    assert set(bars) == {"radio", "gps"}
    radio = bars["radio"][0]
    assert ms(radio.get("data-start-ms")) == x["end"] - 35_000_000
    assert radio.get("data-open-start") == "1"
    assert ms(radio.get("data-end-ms")) == x["src"]["radio"][-1][1]
    # 2h: everything; 90s, 10m, 1d, 1h30m parse.
    full = run_report("--text", path).stdout
    assert run_report("--text", "--since=2h", path).stdout.split("\n", 1)[1] == \
        full.split("\n", 1)[1]
    for d in ("90s", "10m", "1d", "1h30m", "1500ms"):
        run_report("--text", f"--since={d}", path)


def test_since_starting_inside_a_sleep(tmp_path):
    """A window that begins while the host sleeps: the monotonic time cut
    off skips the sleep (to within its own 10 ms of monotonic time)."""
    j, _ = day()
    path = j.write(tmp_path / "journal")
    lines = norm(run_report("--text", "--since=25s", path).stdout)
    i = lines.index("Top sources by active time")
    m = re.match(r"1\. radio (\d+)\.(\d{3})s", lines[i + 1])
    assert m and abs(int(m.group(1)) * 1000 + int(m.group(2)) - 2000) <= 10, lines[i + 1]


def test_rotated_journals_read_as_one(tmp_path):
    j, x = day()
    whole = run_report("--text", j.write(tmp_path / "whole")).stdout
    # Split mid-boot, between radio's lock and unlock; given newest first.
    cut = next(i for i, ln in enumerate(j.lines) if '"wifi"' in ln) + 1
    older = j.write(tmp_path / "journal.1", j.lines[:cut])
    newer = j.write(tmp_path / "journal", j.lines[cut:])
    assert run_report("--text", newer, older).stdout == whole
    assert run_report("--text", older, newer).stdout == whole
    run_report(f"--trace={tmp_path / 'a.json'}", newer, older)
    run_report(f"--trace={tmp_path / 'b.json'}", tmp_path / "whole")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    # Only the newer part of a journal cut after radio's first lock: its
    # release (was_active) shows it active from the start of the data.
    cut = next(i for i, ln in enumerate(j.lines) if '"radio"' in ln) + 1
    newer = j.write(tmp_path / "newer", j.lines[cut:])
    lines = norm(run_report("--text", newer).stdout)
    i = lines.index("Top sources by active time")
    assert lines[i + 1].startswith("1. radio 8.200s ")
    run_report(f"--html={tmp_path / 'n.html'}", newer)
    svg = svg_of((tmp_path / "n.html").read_text(encoding="utf-8"))
    radio = bars_by_source(svg)["radio"]
    assert radio[0].get("data-open-start") == "1"
    assert radio[0].get("data-start-ms") == svg.get("data-start-ms")
    assert ms(radio[0].get("data-end-ms")) == x["src"]["radio"][0][1]


def test_crash_ends_locks_at_their_timeout(tmp_path):
    """powerfs died (no stop, no expire): at the next start a lock with a
    timeout ends when it would have expired, one without at the last event
    before the crash."""
    j = Journal()
    j.at(0).ev("start", version="0.2.0", boot_id="A", backend="simulate", states="mem")
    a = j.at(1000).ev("lock", src="timed", timeout_ms=2000, created=True,
                      was_active=False, **HOST)[1]
    b = j.at(1500).ev("lock", src="held", timeout_ms=0, created=True,
                      was_active=False, **HOST)[1]
    last = j.at(5000).ev("count_read", count=1, pid=1, uid=0)[1]
    j.at(9000).ev("start", version="0.2.0", boot_id="A", backend="simulate", states="mem")
    j.at(9500).ev("stop")
    path = j.write(tmp_path / "j")
    lines = norm(run_report("--text", path).stdout)
    i = lines.index("Top sources by active time")
    assert lines[i + 1].startswith("1. held 3.500s")
    assert lines[i + 2].startswith("2. timed 2.000s")
    run_report(f"--html={tmp_path / 'r.html'}", path)
    bars = bars_by_source(svg_of((tmp_path / "r.html").read_text(encoding="utf-8")))
    assert (ms(bars["timed"][0].get("data-start-ms")), ms(bars["timed"][0].get("data-end-ms"))) \
        == (a, a + 2_000_000)
    assert (ms(bars["held"][0].get("data-start-ms")), ms(bars["held"][0].get("data-end-ms"))) \
        == (b, last)


# ---------------------------------------------------------------------------
# Bad input

GOOD = '{"t":1000,"wall":1700000000000000,"ev":"start","boot_id":"x"}\n' \
       '{"t":2000,"wall":1700000000001000,"ev":"lock","src":"a","timeout_ms":0}\n'


def bad(tmp_path, content, name="j"):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


@pytest.mark.parametrize("content,line,msg", [
    (GOOD + '{"t":3000,"wall":17000\n{"t":4000,"wall":1700000000003000,"ev":"stop"}\n',
     3, "not a JSON object"),
    (GOOD + '[1, 2]\n', 3, "not a JSON object"),
    (GOOD + '{"wall":1700000000002000,"ev":"unlock","src":"a"}\n', 3, "'t'"),
    (GOOD + '{"t":"x","wall":1700000000002000,"ev":"stop"}\n', 3, "integers"),
    (GOOD + '{"t":3000,"wall":1700000000002000,"ev":"lock","src":7}\n', 3, "src"),
    (GOOD + '\n\n{"t":3000,"wall":1700000000002000}\n', 5, "'ev'"),
    (GOOD.encode() + b'{"t":3000,"wall":1,"ev":"lock","src":"\xff"}\n', 3, "UTF-8"),
    (GOOD + '{"t":3000,"wall":1700000000002000,"ev":"suspend","result":"no"}\n',
     3, "result"),
])
def test_malformed_line_names_file_and_line(tmp_path, content, line, msg):
    p = bad(tmp_path, content)
    for mode in ("--text", f"--html={tmp_path / 'o.html'}", f"--trace={tmp_path / 'o.json'}"):
        r = run_report(mode, p, check=False)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith(f"powerfs-report: {p}:{line}: "), r.stderr
        assert msg in r.stderr
        assert r.stdout == ""
    assert not (tmp_path / "o.html").exists() and not (tmp_path / "o.json").exists()


def test_malformed_line_in_the_second_file(tmp_path):
    a = bad(tmp_path, GOOD, "j.1")
    b = bad(tmp_path, GOOD.replace("1700000000000000", "1700000001000000")
            .replace("1700000000001000", "1700000001001000") + "garbage\n", "j")
    r = run_report("--text", b, a, check=False)
    assert r.returncode == 2 and r.stderr.startswith(f"powerfs-report: {b}:3: ")


def test_missing_file(tmp_path):
    r = run_report("--text", tmp_path / "nope", check=False)
    assert r.returncode == 2
    assert r.stderr == f"powerfs-report: {tmp_path / 'nope'}: No such file or directory\n"


def test_empty_journal(tmp_path):
    r = run_report("--text", bad(tmp_path, ""), check=False)
    assert r.returncode == 2 and "no events" in r.stderr


def test_torn_last_line_is_skipped_with_a_warning(tmp_path):
    p = bad(tmp_path, GOOD + '{"t":3000,"wall":17000000')
    r = run_report("--text", p)
    assert r.stderr == f"powerfs-report: warning: {p}:3: ignoring an incomplete last line\n"
    assert "1 powerfs run(s)" in r.stdout


def test_torn_line_before_a_restart_is_skipped_with_a_warning(tmp_path):
    p = bad(tmp_path, GOOD + '{"t":3000,"wall":17000\n'
            '{"t":4000,"wall":1700000000003000,"ev":"start","boot_id":"x"}\n')
    r = run_report("--text", p)
    assert "ignoring a malformed line before a start event" in r.stderr
    assert f"{p}:3:" in r.stderr
    assert "2 powerfs run(s)" in r.stdout


@pytest.mark.parametrize("args,msg", [
    ([], "give one of"),
    (["--text"], "no journal given"),
    (["--text", "--html=x"], "give one of"),
    (["--since=5 minutes", "--text", "j"], "bad duration"),
    (["--top=0", "--text", "j"], "--top"),
    (["--bogus", "--text", "j"], "unknown option"),
    (["--html=", "j"], "needs a file name"),
])
def test_usage_errors(args, msg):
    r = run_report(*args, check=False)
    assert r.returncode == 2 and msg in r.stderr and r.stdout == ""


def test_help():
    r = run_report("--help")
    assert r.stdout.startswith("Usage: powerfs-report [--since=DURATION] [--top=N]")
    assert "--trace=FILE" in r.stdout and r.stderr == ""


def test_unwritable_output(tmp_path):
    j, _ = day()
    r = run_report(f"--html={tmp_path}/no/such/dir/r.html", j.write(tmp_path / "j"),
                   check=False)
    assert r.returncode == 1 and "No such file or directory" in r.stderr


@pytest.mark.timeout(600)
def test_make_builds_and_installs_it(tmp_path):
    r = subprocess.run(["make", "-C", str(REPO), "powerfs-report"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    exe = REPO / "powerfs-report"
    assert exe.read_text().startswith("#!/usr/bin/python3\n")
    assert os.access(exe, os.X_OK)
    r = subprocess.run(["make", "-C", str(REPO), "install", "PREFIX=/opt/pf",
                        f"DESTDIR={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    installed = tmp_path / "opt/pf/bin/powerfs-report"
    assert os.access(installed, os.X_OK)
    assert subprocess.run([str(installed), "--help"], capture_output=True,
                          text=True).stdout.startswith("Usage: powerfs-report")


# ---------------------------------------------------------------------------
# Rendered in a real browser

def png_pixels(data):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, hdr
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def screenshot(html_path, png_path, width=1400, height=900):
    profile = tempfile.mkdtemp(prefix="chromium-")
    try:
        r = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", f"--screenshot={png_path}",
             f"--window-size={width},{height}", f"file://{html_path}"],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return Path(png_path).read_bytes()


@pytest.mark.timeout(300)
def test_html_renders_in_chromium(tmp_path):
    assert os.access(CHROMIUM, os.X_OK), "chromium is not installed (scripts/install-deps.sh)"
    jpath = tmp_path / "j"
    subprocess.run([PYTHON, str(GEN), "--seed=5", str(jpath)], check=True,
                   capture_output=True, timeout=60)
    run_report(f"--html={tmp_path / 'r.html'}", jpath)
    w, h, rows = png_pixels(screenshot(tmp_path / "r.html", tmp_path / "r.png"))
    assert (w, h) == (1400, 900)
    colours = {}
    for row in rows[::2]:
        for px in row[::2]:
            colours[px] = colours.get(px, 0) + 1
    total = sum(colours.values())
    white = colours.get((255, 255, 255), 0)
    assert len(colours) > 50, len(colours)
    assert white < 0.95 * total
    # The bars' blue, the autosleep green and the failed-suspend red are drawn.
    def near(rgb, tol=6):
        return sum(n for c, n in colours.items()
                   if all(abs(c[i] - rgb[i]) <= tol for i in range(3)))
    assert near((0x2f, 0x6f, 0xb0)) > 500
    assert near((0x3a, 0x9a, 0x3a)) > 200
    assert near((0xd6, 0x27, 0x28)) > 5


@pytest.mark.timeout(300)
def test_hover_shows_the_interval_in_chromium(tmp_path):
    """The page's own script: hovering a bar shows its source and times."""
    j, x = day()
    run_report(f"--html={tmp_path / 'r.html'}", j.write(tmp_path / "j"))
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    probe = ("<script>var r=document.querySelector('g.src rect');"
             "var b=r.getBoundingClientRect();"
             "r.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,"
             "clientX:b.x+1,clientY:b.y+1}));var t=document.getElementById('tip');"
             "document.body.setAttribute('data-probe',t.style.display+'|'+t.textContent);"
             "</script></body>")
    (tmp_path / "p.html").write_text(page.replace("</body>", probe), encoding="utf-8")
    profile = tempfile.mkdtemp(prefix="chromium-")
    try:
        r = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--dump-dom", f"file://{tmp_path / 'p.html'}"],
            capture_output=True, text=True, timeout=120, env=dict(os.environ, TZ="UTC"))
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'<body data-probe="([^"]*)"', r.stdout)
    assert m, r.stdout[:500]
    # radio, 1 s after the first event (22:13:21 UTC), for 3 s.
    assert m.group(1) == "block|radio\n22:13:21.123 .. 22:13:24.123 (3.000s)"


# ---------------------------------------------------------------------------
# Scale (how fast a report of 1M events is made: scripts/bench)

@pytest.mark.timeout(600)
def test_a_day_of_1000_sources(tmp_path):
    """300,000 events of 1,000 sources over a day: the page stays under
    20,000 SVG elements, and past 100,000 changes the trace's counter is
    the highest value per period, its highest the most slices ever open at
    once."""
    jpath = tmp_path / "big"
    subprocess.run([PYTHON, str(GEN), "--sources=1000", "--duration=24h",
                    "--events=300000", "--seed=1", str(jpath)], check=True,
                   capture_output=True, timeout=600)
    env = dict(os.environ, TZ="UTC")
    for mode, out in (("--html", "r.html"), ("--trace", "t.json")):
        subprocess.run(report_cmd() + [f"{mode}={tmp_path / out}",
                                       str(jpath)],
                       env=env, check=True, capture_output=True, timeout=600)
    svg = svg_of((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert sum(1 for _ in svg.iter()) - 1 <= 20000
    doc, _ = load_trace(tmp_path / "t.json")
    counts = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert 1000 < len(counts) <= 100_002
    assert counts[0]["name"].startswith("active sources (highest per ")
    edges = sorted(x for e in doc["traceEvents"]
                   if e["ph"] == "X" and e["cat"] == "wakelock"
                   for x in ((e["ts"], 1), (e["ts"] + e["dur"], -1)))
    level = most = 0
    for _, d in sorted(edges, key=lambda x: (x[0], x[1])):
        level += d
        most = max(most, level)
    assert max(e["args"]["active"] for e in counts) == most


# ---------------------------------------------------------------------------
# Hostile names: a container may name a lock anything but whitespace, and
# the report must not hand it to the admin's terminal or page raw.

HOSTILE = [
    # (name in the journal, src_hex or None, how the report shows it)
    ("\x1b[31mred\x1b[0m", None, r"\x1b[31mred\x1b[0m"),
    ("\x1b]0;owned\x07", None, r"\x1b]0;owned\x07"),
    ("invoice\u202efdp.exe", None, r"invoice\xe2\x80\xaefdp.exe"),
    ("a\u2066b\u2069c", None, r"a\xe2\x81\xa6b\xe2\x81\xa9c"),
    ("csi\u009b2J", None, r"csi\xc2\x9b2J"),
    ("zero\u200bwidth\ufeff", None, r"zero\xe2\x80\x8bwidth\xef\xbb\xbf"),
    ("line\u2028sep", None, r"line\xe2\x80\xa8sep"),
    ("back\\x41slash", None, r"back\\x41slash"),
    ("café-ok", None, "café-ok"),
    ("\ufffd\ufffd\x1b", "fffe1b", r"\xff\xfe\x1b"),
]
HOSTILE_CGROUP = "/lxc/\x1b[2J\u202eevil"
HOSTILE_CGROUP_SHOWN = r"/lxc/\x1b[2J\xe2\x80\xaeevil"


def hostile_journal():
    j = Journal()
    j.at(0).ev("start", version="0.2.0", boot_id="A", backend="simulate",
               states="freeze mem disk")
    for i, (name, hx, _) in enumerate(HOSTILE):
        extra = {"src_hex": hx} if hx else {}
        j.at(100 + 10 * i).ev("lock", src=name, timeout_ms=0, created=True,
                              was_active=False, pid=5, uid=0,
                              cgroup=HOSTILE_CGROUP, pidns=4026532999, **extra)
    j.at(1000)
    t0, w0 = j.t, j.wall
    j.at(1050).ev("suspend", state="mem", by="state", start=t0, end=j.t,
                  start_wall=w0, end_wall=j.wall, result=-16, step="freeze",
                  active=[n for n, _, _ in HOSTILE[:3]],
                  signalled=[HOSTILE[2][0]], pid=5, uid=0)
    for i, (name, hx, _) in enumerate(HOSTILE):
        extra = {"src_hex": hx} if hx else {}
        j.at(2000 + 10 * i).ev("unlock", src=name, was_active=True, pid=5,
                               uid=0, **extra)
    j.at(3000).ev("stop")
    return j


def all_shown(text):
    """The characters that are not printable (str.isprintable: controls,
    format characters such as the bidirectional controls, separators)."""
    return sorted({c for c in text if not c.isprintable() and c != "\n"})


def test_hostile_names_in_the_text_summary(tmp_path):
    path = hostile_journal().write(tmp_path / "journal")
    out = run_report("--text", path).stdout
    assert all_shown(out) == []
    lines = norm(out)
    for _, _, want in HOSTILE:
        assert any(line.split(" ", 1)[1].startswith(want + " ")
                   for line in lines if re.match(r"\d+\. ", line)), want
    assert any(line.endswith(f"{HOSTILE_CGROUP_SHOWN} uid 0") for line in lines)
    # The failed suspend's blocker, in the causes and the latest attempts.
    assert f"1 wakeup event: {HOSTILE[2][2]}" in lines


def test_hostile_names_in_the_page_and_the_trace(tmp_path):
    path = hostile_journal().write(tmp_path / "journal")
    html_path = tmp_path / "r.html"
    run_report(f"--html={html_path}", path)
    page = html_path.read_text(encoding="utf-8")
    assert all_shown(page.replace("\t", "")) == []
    svg = svg_of(page)
    assert set(bars_by_source(svg)) == {want for _, _, want in HOSTILE}
    fails = [p for p in svg.iter(NS + "path") if p.get("class") == "fail"]
    assert fails[0].get("data-blocking") == HOSTILE[2][2]
    assert HOSTILE_CGROUP_SHOWN in page
    trace = tmp_path / "t.json"
    run_report(f"--trace={trace}", path)
    doc, threads = load_trace(trace)
    assert {want for _, _, want in HOSTILE} <= set(threads.values())
    inst = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert inst[0]["args"]["blocking"] == [HOSTILE[2][2]]
    assert inst[0]["args"]["active"] == [w for _, _, w in HOSTILE[:3]]
    assert all_shown(json.dumps(doc, ensure_ascii=False)) == []
