"""The event journal (--journal=PATH) on a real mount, and powerfs-report
on what it wrote.

The scripted day drives one powerfs with writers on the host and in two
"containers" (a pid namespace of their own, one of them also in a cgroup of
its own), a timeout that expires, the wakeup_count handshake, a suspend
that fails because a lock was taken after the handshake, a suspend that
succeeds, autosleep on and off, and checks every line of the journal: the
fields exactly, and the times between clock readings taken around each
action.  Then powerfs-report reads that journal: the SVG bars and the trace
slices must be the journal's intervals to 1 ms.

Set POWERFS_KEEP_JOURNAL=PATH to keep the day's journal (docs/ screenshot).
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import conftest
from conftest import PYTHON, Powerfs, raises_errno, thread_switches, wait_until
from test_report import (NS, bars_by_source, check_x, load_trace, ms,
                         run_report, svg_of)

UNSHARE = shutil.which("unshare") or "/usr/bin/unshare"
CGROUP2 = "/sys/fs/cgroup/unified" if os.path.isdir(
    "/sys/fs/cgroup/unified/") else "/sys/fs/cgroup"
SLEEP_MS = 300


def now():
    """(monotonic, wall) in microseconds, as the journal's t and wall."""
    return (time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000,
            time.time_ns() // 1000)


def read_journal(path):
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    assert text == "" or text.endswith("\n"), "a torn line"
    return [json.loads(ln) for ln in text.splitlines()]


def wait_lines(path, n, timeout=5.0):
    """The journal once it has at least n lines (it is written in bursts
    about 10 ms apart)."""
    wait_until(lambda: len(read_journal(path)) >= n, timeout=timeout)
    return read_journal(path)


def v2_cgroup(pid):
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].rstrip("\n")
    return None


def pidns(pid):
    return os.stat(f"/proc/{pid}/ns/pid").st_ino


WRITER = r"""
import os, sys
print(os.stat("/proc/self/ns/pid").st_ino, flush=True)
for line in sys.stdin:
    path, data = line.rstrip("\n").split("\t")
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, bytes.fromhex(data))
        finally:
            os.close(fd)
        print(0, flush=True)
    except OSError as e:
        print(e.errno, flush=True)
"""


class Container:
    """A writer in a pid namespace of its own (unshare --pid --fork), and
    in cgroup (a v2 path) if given."""

    def __init__(self, cgroup=None):
        def enter():
            if cgroup:
                with open(os.path.join(CGROUP2, cgroup.lstrip("/"),
                                       "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
        self.proc = subprocess.Popen([UNSHARE, "--pid", "--fork", PYTHON, "-c", WRITER],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, preexec_fn=enter)
        self.ns = int(self.proc.stdout.readline())
        kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        self.pid = int(kids.split()[0])
        assert pidns(self.pid) == self.ns != pidns(os.getpid())
        self.cgroup = v2_cgroup(self.pid)
        if cgroup:
            assert self.cgroup == cgroup

    def write(self, path, data):
        self.proc.stdin.write(f"{path}\t{data.hex()}\n")
        self.proc.stdin.flush()
        err = int(self.proc.stdout.readline())
        if err:
            raise OSError(err, os.strerror(err))

    def who(self):
        return {"pid": self.pid, "uid": 0, "cgroup": self.cgroup,
                "pidns": self.ns}

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(10)


def host_who():
    return {"pid": os.getpid(), "uid": 0, "cgroup": v2_cgroup(os.getpid()),
            "pidns": pidns(os.getpid())}


def owrite(path, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class Script:
    """Actions and the journal lines they must produce, with the clock
    readings around each."""

    def __init__(self, inst):
        self.inst = inst
        self.want = []      # (before, fields, after)

    def do(self, fn, *events):
        before = now()
        ret = fn()
        after = now()
        for ev in events:
            self.want.append((before, ev, after))
        return ret

    def expect(self, before, ev, after):
        self.want.append((before, ev, after))


def lock_ev(name, who, timeout_ms=0, created=True, was_active=False, raw=None):
    e = {"ev": "lock", "src": name, "timeout_ms": timeout_ms,
         "created": created, "was_active": was_active, **who}
    if raw is not None:
        e["src_hex"] = raw.hex()
    return e


def unlock_ev(name, who, was_active=True, raw=None):
    e = {"ev": "unlock", "src": name, "was_active": was_active, **who}
    if raw is not None:
        e["src_hex"] = raw.hex()
    return e


TIMES = ("t", "wall", "start", "end", "start_wall", "end_wall")


def check_times(got, before, after):
    """t and wall between the clock readings around the action; an
    attempt's start and end too, in order."""
    assert before[0] <= got["t"] <= after[0], (got, before, after)
    assert before[1] - 1000 <= got["wall"] <= after[1] + 1000, (got, before, after)
    if "start" in got:
        assert before[0] <= got["start"] <= got["end"] == got["t"] <= after[0]
        assert got["start_wall"] <= got["end_wall"]
        assert abs((got["end"] - got["start"])
                   - (got["end_wall"] - got["start_wall"])) < 2000


def strip_times(e):
    return {k: v for k, v in e.items() if k not in TIMES}


@pytest.fixture
def day_cgroup():
    name = f"/powerfs-journal-{os.getpid()}"
    path = os.path.join(CGROUP2, name.lstrip("/"))
    try:
        os.mkdir(path)
    except OSError as e:
        pytest.skip(f"cannot make a cgroup in {CGROUP2}: {e}")
    yield name
    deadline = time.monotonic() + 5
    while True:
        try:
            os.rmdir(path)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.timeout(120)
def test_a_scripted_day(tmp_path, day_cgroup):
    jpath = tmp_path / "powerfs.journal"
    inst = Powerfs(f"--journal={jpath}", f"--simulate-sleep-ms={SLEEP_MS}",
                   "--wakelock-gc-seconds=0")
    t0 = now()
    inst.start()
    a = b = None
    try:
        a, b = Container(), Container(day_cgroup)
        run_day(inst, jpath, a, b, t0)
    finally:
        for c in (a, b):
            if c:
                c.close()
        if inst.proc.poll() is None and os.path.ismount(inst.mnt):
            inst.stop()
    if os.environ.get("POWERFS_KEEP_JOURNAL"):
        shutil.copy(jpath, os.environ["POWERFS_KEEP_JOURNAL"])
    check_report(tmp_path, jpath)


def run_day(inst, jpath, a, b, t0):
    s = Script(inst)
    host = host_who()
    p = inst.path
    j = wait_lines(jpath, 1)
    t1 = now()
    start = j[0]
    check_times(start, t0, t1)
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert strip_times(start) == {"ev": "start", "version": "0.1.0", "boot_id": boot_id,
                                  "backend": "simulate", "states": "freeze mem disk"}

    # Morning: the host and the two containers take locks.
    s.do(lambda: owrite(p("wake_lock"), b"host-app\n"), lock_ev("host-app", host))
    s.do(lambda: a.write(p("wake_lock"), b"a-sync"), lock_ev("a-sync", a.who()))
    s.do(lambda: b.write(p("wake_lock"), b"b-media\n"), lock_ev("b-media", b.who()))
    # Again, while held: not created, already active.
    s.do(lambda: b.write(p("wake_lock"), b"b-media"),
         lock_ev("b-media", b.who(), created=False, was_active=True))
    # A timeout: 150 ms (in nanoseconds), rounded up to whole ms.
    before = now()
    a.write(p("wake_lock"), b"a-alarm 149999001")
    after = now()
    s.expect(before, lock_ev("a-alarm", a.who(), timeout_ms=150), after)
    wait_until(lambda: any(e["ev"] == "expire" for e in read_journal(jpath)))
    s.expect((before[0] + 150_000, before[1] + 150_000), {"ev": "expire", "src": "a-alarm"},
             now())
    # Names of any bytes: not UTF-8 (hex-keyed), quotes, a backslash, a
    # control character.
    raw = b"b\xff\xfe-radio"
    s.do(lambda: b.write(p("wake_lock"), raw), lock_ev("b\ufffd\ufffd-radio", b.who(), raw=raw))
    odd = b'q"u\\o\x01te'
    s.do(lambda: owrite(p("wake_lock"), odd), lock_ev(odd.decode(), host))
    s.do(lambda: owrite(p("wake_unlock"), odd), unlock_ev(odd.decode(), host))
    s.do(lambda: b.write(p("wake_unlock"), raw),
         unlock_ev("b\ufffd\ufffd-radio", b.who(), raw=raw))
    # Releases: by another writer than the locker; again when inactive.
    s.do(lambda: a.write(p("wake_unlock"), b"b-media"), unlock_ev("b-media", a.who()))
    s.do(lambda: b.write(p("wake_unlock"), b"b-media"),
         unlock_ev("b-media", b.who(), was_active=False))
    s.do(lambda: a.write(p("wake_unlock"), b"a-sync\n"), unlock_ev("a-sync", a.who()))
    # Taken again: known, not active.
    s.do(lambda: a.write(p("wake_lock"), b"a-sync"),
         lock_ev("a-sync", a.who(), created=False))
    s.do(lambda: a.write(p("wake_unlock"), b"a-sync"), unlock_ev("a-sync", a.who()))
    # What fails leaves no line.
    with raises_errno(22):
        a.write(p("wake_unlock"), b"nobody")
    with raises_errno(22):
        owrite(p("wake_lock"), b"x notanumber")
    s.do(lambda: owrite(p("wake_unlock"), b"host-app"), unlock_ev("host-app", host))

    # Noon: the handshake, then a lock from a container before the state
    # write: the suspend fails and names it.
    before = now()
    count = int(inst.read("wakeup_count"))
    s.expect(before, {"ev": "count_read", "count": count, **host}, now())
    s.do(lambda: owrite(p("wakeup_count"), b"%d" % count),
         {"ev": "count_write", "count": count, "result": 0, **host})
    s.do(lambda: a.write(p("wake_lock"), b"a-push"), lock_ev("a-push", a.who()))
    before = now()
    with raises_errno(16):
        owrite(p("state"), b"mem")
    s.expect(before, {"ev": "suspend", "state": "mem", "by": "state",
                             "result": -16, "step": "freeze", "active": ["a-push"],
                             "signalled": ["a-push"], **host}, now())
    assert inst.read("suspend_stats/last_failed_step") == b"freeze\n"
    s.do(lambda: a.write(p("wake_unlock"), b"a-push"), unlock_ev("a-push", a.who()))
    # A stale count: refused.
    before = now()
    with raises_errno(22):
        owrite(p("wakeup_count"), b"%d" % count)
    s.expect(before, {"ev": "count_write", "count": count, "result": -22, **host},
             now())
    # A suspend that succeeds: the simulated backend sleeps SLEEP_MS.
    s.do(lambda: owrite(p("state"), b"mem"),
         {"ev": "suspend", "state": "mem", "by": "state", "result": 0, "step": "",
          "active": [], "signalled": [], **host})

    # Evening: autosleep on in container b; it suspends again and again
    # until a writes "off".
    s.do(lambda: b.write(p("autosleep"), b"mem\n"),
         {"ev": "autosleep", "state": "mem", **b.who()})
    wait_until(lambda: read_journal(jpath)[-1]["ev"] == "autosleep")
    n = len(read_journal(jpath))
    wait_until(lambda: sum(1 for e in read_journal(jpath)[n:]
                           if e["ev"] == "suspend") >= 2, timeout=10)
    s.do(lambda: a.write(p("autosleep"), b"off"),
         "autosleep suspends", {"ev": "autosleep", "state": "off", **a.who()})
    wait_until(lambda: read_journal(jpath)[-1]["ev"] == "autosleep")
    check_journal(jpath, start, s.want, before_stop=True)

    inst.stop()
    after = now()
    j = read_journal(jpath)
    assert strip_times(j[-1]) == {"ev": "stop"}
    check_times(j[-1], s.want[-1][2], after)
    check_journal(jpath, start, s.want, before_stop=False)


def check_journal(jpath, start, want, before_stop):
    """Every line is a wanted one, in order: the autosleep phase is one or
    more successful suspends by autosleep (and may end when autosleep
    goes off)."""
    got = read_journal(jpath)
    assert got[0] == start
    rest = got[1:] if before_stop else got[1:-1]
    i = 0
    for before, ev, after in want:
        if ev == "autosleep suspends":
            k = 0
            while i < len(rest) and rest[i]["ev"] == "suspend":
                e = rest[i]
                assert strip_times(e) == {"ev": "suspend", "state": "mem", "by": "autosleep",
                                          "result": 0, "step": "", "active": [],
                                          "signalled": []}, e
                assert e["start"] >= before[0] - 10 * SLEEP_MS * 1000
                i, k = i + 1, k + 1
            assert k >= 2, [strip_times(e) for e in rest[i - k - 2:i + 3]]
            continue
        assert i < len(rest), f"missing {ev}"
        e = rest[i]
        assert strip_times(e) == ev, (i, e)
        check_times(e, before, after)
        i += 1
    assert i == len(rest), rest[i:]
    # The attempt that succeeded slept SLEEP_MS, the failed one did not.
    sus = [e for e in rest if e["ev"] == "suspend" and e["by"] == "state"]
    assert sus[0]["end"] - sus[0]["start"] < 50_000
    assert SLEEP_MS * 1000 <= sus[1]["end"] - sus[1]["start"] < SLEEP_MS * 1000 + 500_000
    # Each line is JSON of the exact shape: t, wall and ev first.
    for e in got:
        assert list(e)[:3] == ["t", "wall", "ev"]


def intervals(events):
    """{source key: [(wall0, wall1)]} from the journal, as the report must
    draw them: from the lock that activated a source to its release."""
    since, out = {}, {}
    for e in events:
        if e["ev"] not in ("lock", "unlock", "expire"):
            continue
        raw = bytes.fromhex(e["src_hex"]) if "src_hex" in e \
            else e["src"].encode()
        name = LABELS.get(raw, e["src"])    # the report's label
        if e["ev"] == "lock":
            if not e["was_active"]:
                since[name] = e["wall"]
        elif name in since:
            out.setdefault(name, []).append((since.pop(name), e["wall"]))
    return out


# The report's labels of the day's odd names: their bytes, a backslash
# doubled, the rest as \xNN.
LABELS = {b'q"u\\o\x01te': r'q"u\\o\x01te', b"b\xff\xfe-radio": r"b\xff\xfe-radio"}


def check_report(tmp_path, jpath):
    events = read_journal(jpath)
    want = intervals(events)
    html = tmp_path / "r.html"
    run_report(f"--html={html}", jpath)
    svg = svg_of(html.read_text(encoding="utf-8"))
    bars = bars_by_source(svg)
    assert set(bars) == set(want), (bars.keys(), want.keys())
    # Intervals closer than a pixel are drawn as one bar.
    px_us = (ms(svg.get("data-end-ms")) - ms(svg.get("data-start-ms"))) \
        / float(svg.get("data-plot-w"))

    def drawn(spans):
        out = []
        for a, b in spans:
            if out and a - out[-1][1] < px_us:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
        return out

    for name, spans in want.items():
        spans = drawn(spans)
        got = [(ms(r.get("data-start-ms")), ms(r.get("data-end-ms"))) for r in bars[name]]
        assert len(got) == len(spans), name
        for (a, b), (x, y), el in zip(spans, got, bars[name]):
            assert abs(a - x) <= 1000 and abs(b - y) <= 1000, (name, (a, b), (x, y))
            check_x(svg, el, x)
    # Suspended periods shaded: the successful attempts.
    ok = [(e["start_wall"], e["end_wall"]) for e in events
          if e["ev"] == "suspend" and e["result"] == 0]
    shades = [(ms(r.get("data-start-ms")), ms(r.get("data-end-ms")))
              for r in svg.iter(NS + "rect") if r.get("class") == "shade"]
    assert len(shades) == len(drawn(ok))
    for (a, b), (x, y) in zip(drawn(ok), shades):
        assert abs(a - x) <= 1000 and abs(b - y) <= 1000
    # The failed suspend, named.
    fails = [p for p in svg.iter(NS + "path") if p.get("class") == "fail"]
    assert [f.get("data-blocking") for f in fails] == ["a-push"]
    failed = [e for e in events if e["ev"] == "suspend" and e["result"]]
    assert abs(ms(fails[0].get("data-end-ms")) - failed[0]["end_wall"]) <= 1000

    # The trace: a track per source, a slice per interval; the suspended
    # track; the failed attempt as an instant with its blocker.
    trace = tmp_path / "t.json"
    run_report(f"--trace={trace}", jpath)
    doc, threads = load_trace(trace)
    base = doc["otherData"]["wall_start_us"]
    assert base == events[0]["wall"]
    tids = {name: tid for tid, name in threads.items()}
    by_tid = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            by_tid.setdefault(e["tid"], []).append(e)
    for name, spans in want.items():
        key = name if name in tids else next(n for n in tids if n.startswith(name))
        got = by_tid[tids[key]]
        assert len(got) == len(spans), name
        for (a, b), e in zip(spans, got):
            assert abs(e["ts"] + base - a) <= 1000
            assert abs(e["ts"] + e["dur"] + base - b) <= 1000
    got = by_tid[tids["suspended"]]
    assert len(got) == len(ok)
    for (a, b), e in zip(ok, got):
        assert abs(e["ts"] + base - a) <= 1000 and abs(e["ts"] + e["dur"] + base - b) <= 1000
    inst = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert len(inst) == 1
    assert inst[0]["args"]["blocking"] == ["a-push"]
    assert inst[0]["args"]["result"] == -16 and inst[0]["args"]["step"] == "freeze"
    assert abs(inst[0]["ts"] + base - failed[0]["end_wall"]) <= 1000
    # The counter of active sources follows the journal.
    spans = [s for v in want.values() for s in v]
    for e in doc["traceEvents"]:
        if e["ph"] == "C":
            w = e["ts"] + base
            n = sum(1 for a, b in spans if a <= w < b)
            assert abs(e["args"]["active"] - n) <= 1, (w, e)
    # The text summary names the blocker too.
    r = run_report("--text", jpath)
    assert "a-push" in r.stdout


# ---------------------------------------------------------------------------

def test_garbage_collection_is_recorded(mount, tmp_path):
    jpath = tmp_path / "j"
    inst = mount(f"--journal={jpath}", "--wakelock-gc-seconds=0")
    inst.lock("old")
    inst.unlock("old")
    for _ in range(100):
        inst.lock("churn")
        inst.unlock("churn")
    j = wait_lines(jpath, 1 + 2 + 200 + 2)
    gcs = [e for e in j if e["ev"] == "gc"]
    # The 101st unlock collects every idle lock, least recently used first.
    assert [strip_times(e) for e in gcs] == [{"ev": "gc", "src": "old"},
                                            {"ev": "gc", "src": "churn"}]
    assert j[-2:] == gcs
    assert inst.read("wake_unlock") == b"\n"


def test_rotates_at_journal_size(mount, tmp_path):
    jpath = tmp_path / "j"
    size = 65536
    inst = mount(f"--journal={jpath}", f"--journal-size={size}", "--wakelock-limit=0")
    names = [f"rotation-{i:04d}" for i in range(300)]
    for name in names:
        inst.lock(name)
    for name in names:
        inst.unlock(name)
    old = Path(f"{jpath}.1")
    wait_until(lambda: old.exists() and
               len(read_journal(jpath)) + len(read_journal(old)) >= 601)
    assert not Path(f"{jpath}.2").exists()
    for p in (old, jpath):
        assert 0 < p.stat().st_size <= size
        assert p.read_bytes().endswith(b"\n")
    # Whole lines, none lost, in order across the two files.
    lines = read_journal(old) + read_journal(jpath)
    assert lines[0]["ev"] == "start"
    assert [e["src"] for e in lines[1:]] == names + names
    assert old.stat().st_size + len(json.dumps(lines[len(read_journal(old))],
                                               separators=(",", ":"))) + 1 > size
    # The report reads the pair as one.
    r = run_report("--text", old, jpath)
    assert "300 active sources" in r.stdout or "rotation-0000" in r.stdout


def test_journal_is_not_in_the_mount(mount, tmp_path):
    jpath = tmp_path / "j"
    inst = mount(f"--journal={jpath}")
    inst.lock("visible")
    inst.unlock("visible")
    wait_lines(jpath, 3)
    assert sorted(os.listdir(inst.mnt)) == sorted(conftest.ROOT_ENTRIES)
    for name in ("j", "journal", "powerfs.journal"):
        assert not os.path.exists(inst.path(name))
    for dp, _, fs in os.walk(inst.mnt):
        for f in fs:
            if f == "pm_wakeup_irq":
                continue        # ENODATA: no IRQ woke a simulated sleep
            with open(os.path.join(dp, f), "rb") as fh:
                data = fh.read()
            assert b"journal" not in data and str(jpath).encode() not in data


@pytest.mark.parametrize("where", ["inside", "dir", "missing-dir", "symlink", "fifo"])
def test_unusable_journal_is_refused_at_start(tmp_path, where):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if where == "inside":
        path, msg = mnt / "j", "is inside the mount point"
    elif where == "dir":
        (tmp_path / "d").mkdir()
        path, msg = tmp_path / "d", "is not a regular file"
    elif where == "missing-dir":
        path, msg = tmp_path / "nowhere" / "j", "No such file or directory"
        prefix = f"powerfs: --journal: {tmp_path / 'nowhere'}: "
    elif where == "symlink":
        (tmp_path / "l").symlink_to(tmp_path / "target")
        path, msg = tmp_path / "l", "is not a regular file"
    else:
        os.mkfifo(tmp_path / "f")
        path, msg = tmp_path / "f", "is not a regular file"
    from conftest import POWERFS
    r = subprocess.run([POWERFS, "-f", f"--journal={path}", str(mnt)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    if where != "missing-dir":
        prefix = f"powerfs: --journal: {path}"
    assert r.stderr.startswith(prefix), r.stderr
    assert msg in r.stderr
    assert not os.path.ismount(mnt)


def test_journal_size_too_small_is_refused(tmp_path):
    from conftest import POWERFS
    r = subprocess.run([POWERFS, "-f", f"--journal={tmp_path / 'j'}",
                        "--journal-size=1000", str(tmp_path)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert r.stderr == "powerfs: --journal-size must be 65536 or more\n"


def test_idle_daemon_with_journal_never_wakes(mount, tmp_path):
    """After a burst of events is written, the writer thread (and every
    other) sleeps until the next event: no timer."""
    jpath = tmp_path / "j"
    inst = mount(f"--journal={jpath}")
    inst.lock("burst")
    inst.unlock("burst")
    wait_lines(jpath, 3)
    pid = inst.server_pid()
    # The writer's batch ends and the closes (RELEASE) are processed: every
    # thread sleeps (see conftest.taken()).
    assert wait_until(lambda: conftest.all_asleep(inst.pids()))
    before = thread_switches(pid)
    time.sleep(3)            # no wake-up in a window of 3 s
    assert thread_switches(pid) - before == 0
    assert len(read_journal(jpath)) == 3


def test_torn_line_is_ended_at_start(mount, tmp_path):
    jpath = tmp_path / "j"
    jpath.write_bytes(b'{"t":1,"wall":2,"ev":"lo')
    inst = mount(f"--journal={jpath}")
    inst.lock("after-crash")
    inst.unlock("after-crash")
    wait_until(lambda: jpath.read_bytes().count(b"\n") >= 4)
    lines = jpath.read_bytes().split(b"\n")
    assert lines[0] == b'{"t":1,"wall":2,"ev":"lo'
    assert json.loads(lines[1])["ev"] == "start"
    r = run_report("--text", jpath)
    assert "after-crash" in r.stdout


def test_backend_failure_and_backoff(mount, tmp_path):
    """A backend that fails (DIR/state cannot be opened for writing: EISDIR)
    under autosleep: the attempt, at the step the kernel would count it,
    then the pause autosleep takes."""
    sysdir = tmp_path / "sys"
    sysdir.mkdir()
    (sysdir / "state").write_text("mem\n")
    jpath = tmp_path / "j"
    inst = mount(f"--backend=sysfs:{sysdir}", f"--journal={jpath}")
    os.unlink(sysdir / "state")
    os.mkdir(sysdir / "state")
    inst.write("autosleep", b"mem")
    j = wait_lines(jpath, 4)
    inst.write("autosleep", b"off")
    assert [strip_times(e) for e in j[1:4]] == [
        {"ev": "autosleep", "state": "mem", **host_who()},
        {"ev": "suspend", "state": "mem", "by": "autosleep", "result": -21,
         "step": "suspend", "active": [], "signalled": []},
        {"ev": "backoff", "result": -21, "pause_ms": 500}]
    assert j[2]["start"] <= j[2]["end"] == j[2]["t"] <= j[3]["t"]


def test_restored_state_is_recorded_at_start(mount, tmp_path):
    """What the state file brings back (a held lock, autosleep) is in the
    new run's journal right after its start, as still going on."""
    state, jpath = tmp_path / "state", tmp_path / "j"
    a = Powerfs(f"--state-file={state}", f"--journal={jpath}",
                "--simulate-sleep-ms=100").start()
    try:
        a.lock("kept")
        a.write("autosleep", b"freeze")
    finally:
        a.stop()
    n = len(read_journal(jpath))
    b = mount(f"--state-file={state}", f"--journal={jpath}", "--simulate-sleep-ms=100")
    j = wait_lines(jpath, n + 3)
    b.write("autosleep", b"off")
    b.unlock("kept")
    assert j[n - 1]["ev"] == "stop" and j[n]["ev"] == "start"
    assert [strip_times(e) for e in j[n + 1:n + 3]] == [
        {"ev": "lock", "src": "kept", "timeout_ms": 0, "created": False,
         "was_active": True, "pid": 0, "uid": 0},
        {"ev": "autosleep", "state": "freeze"}]


# Reads wakeup_count as fast as two threads can for SECONDS and prints the
# number of reads that returned a count.
FLOOD = r"""
import os, sys, threading, time
path, seconds = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + seconds
counts = []

def reader():
    n = 0
    fd = os.open(path, os.O_RDONLY)
    while time.monotonic() < end:
        os.pread(fd, 32, 0)
        n += 1
    os.close(fd)
    counts.append(n)

threads = [threading.Thread(target=reader) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sum(counts))
"""


def test_readers_cannot_erase_the_record(mount, tmp_path):
    """Any local user may read wakeup_count (mode 0644).  Two threads of
    uid 1000 reading it as fast as they can, with the smallest journal, must
    not push a lock/unlock pair out of PATH and PATH.1: powerfs coalesces
    what readers make into count_reads lines.  Every read is still counted,
    by uid, and the report says so."""
    jpath = tmp_path / "j"
    inst = mount(f"--journal={jpath}", "--journal-size=65536",
                 "-o", "allow_other")
    inst.lock("kept-awake")
    inst.unlock("kept-awake")
    r = subprocess.run([PYTHON, "-c", FLOOD, inst.path("wakeup_count"), "3"],
                       capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: (os.setgid(1000), os.setuid(1000)))
    assert r.returncode == 0, r.stderr
    reads = int(r.stdout)
    assert reads > 2000, f"only {reads} reads: no flood"
    # A later event writes out the reads gathered so far, before itself.
    inst.lock("after")
    inst.unlock("after")
    old = Path(f"{jpath}.1")
    lines = wait_lines(jpath, 1)
    assert wait_until(lambda: any(e.get("src") == "after" and e["ev"] == "unlock"
                                  for e in read_journal(jpath)))
    lines = read_journal(old) + read_journal(jpath)
    kept = [(e["ev"], e.get("src")) for e in lines if e["ev"] in ("lock", "unlock")]
    assert kept == [("lock", "kept-awake"), ("unlock", "kept-awake"),
                    ("lock", "after"), ("unlock", "after")]
    single = [e for e in lines if e["ev"] == "count_read"]
    merged = [e for e in lines if e["ev"] == "count_reads"]
    assert merged, "no read was coalesced"
    assert all(e["uid"] == 1000 for e in single)
    assert all(set(e["uids"]) == {"1000"} and e["uids"]["1000"] == e["n"]
               and e["count"] == 1 for e in merged)
    assert len(single) + sum(e["n"] for e in merged) == reads
    # A few lines for thousands of reads: the first ones, then one per
    # other event (or per minute of reads).
    assert len(single) + len(merged) <= 12, (len(single), len(merged))
    # In order: the coalesced reads come before the event that ended them.
    evs = [e["ev"] for e in lines]
    assert evs.index("count_reads") < evs.index("lock", 2)
    text = run_report("--text", jpath, *([old] if old.exists() else [])).stdout
    assert f"wakeup_count reads: {reads} (uid 1000 {reads})" in text
