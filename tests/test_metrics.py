"""--metrics-dir=DIR: DIR/powerfs.prom for node_exporter's textfile collector.

The file must say exactly what wakeup_sources and suspend_stats say, in the
Prometheus text exposition format (version 0.0.4), checked by a strict
parser written here from the format's description; and Debian's
prometheus-node-exporter must read it without a scrape error and serve the
same values.  It is written only after a change, at most every 2 s, so an
idle powerfs stays idle.
"""

import errno
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

import conftest
from conftest import SOURCES_HEADER, thread_switches, wait_until

PROM = "powerfs.prom"
INTERVAL = 2.0           # metrics.c's MIN_INTERVAL_US
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or \
    "/usr/bin/prometheus-node-exporter"
STEPS = ("freeze", "prepare", "suspend", "suspend_late", "suspend_noirq",
         "resume_noirq", "resume_early", "resume")

# (metric, wakeup_sources column or None for "is it active", type, help)
SOURCE_FAMILIES = (
    ("powerfs_wakeup_source_activations_total", "active_count", "counter",
     "Times the source became active (wakeup_sources: active_count)."),
    ("powerfs_wakeup_source_events_total", "event_count", "counter",
     "Wakeup events the source signalled (event_count)."),
    ("powerfs_wakeup_source_wakeups_total", "wakeup_count", "counter",
     "Events signalled while a suspend was being prepared, which abort it "
     "(wakeup_count)."),
    ("powerfs_wakeup_source_expirations_total", "expire_count", "counter",
     "Times the source's timeout ended an activation (expire_count)."),
    ("powerfs_wakeup_source_active_seconds_total", "total_time", "counter",
     "Time the source has been active (total_time)."),
    ("powerfs_wakeup_source_prevent_suspend_seconds_total",
     "prevent_suspend_time", "counter",
     "Time the source was active while autosleep was on "
     "(prevent_suspend_time)."),
    ("powerfs_wakeup_source_active", None, "gauge",
     "1 while the source is active, else 0."),
)
SECONDS_COLUMNS = ("total_time", "prevent_suspend_time")


# --- a strict parser of the text exposition format (0.0.4) -------------------

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
# Only \\, \" and \n are escapes in a label value; a lone backslash is not.
LABEL_VALUE = r'"((?:[^"\\\n]|\\[\\"n])*)"'
LABEL = re.compile(rf"({LABEL_NAME})={LABEL_VALUE}")
ANY_LABEL = rf"{LABEL_NAME}=\"(?:[^\"\\\n]|\\[\\\"n])*\""
FLOAT = r"[+-]?(?:Inf|NaN|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
SAMPLE = re.compile(rf"(?P<name>{NAME})"
                    rf"(?:\{{(?P<labels>(?:{ANY_LABEL},)*(?:{ANY_LABEL})?)\}})?"
                    rf" (?P<value>{FLOAT})(?: -?\d+)?")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def unescape(value, help_text=False):
    escapes = {"\\\\": "\\", "\\n": "\n"} if help_text else \
        {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
    return re.sub(r"\\.", lambda m: escapes.get(m.group(0), m.group(0)),
                  value)


def family_of(sample, families):
    """A histogram's or summary's _bucket/_sum/_count samples are its."""
    for suffix in ("_bucket", "_sum", "_count"):
        base = sample[:-len(suffix)]
        if sample.endswith(suffix) and \
                families.get(base, {}).get("type") in ("histogram", "summary"):
            return base
    return sample


def parse_exposition(data):
    """{family: {"type", "help", "samples": {(name, labels): value}}}.
    Fails on anything the format does not allow: bad UTF-8, bad names,
    bad escapes, a TYPE or HELP given twice or a TYPE after samples, a
    family's samples not together, a series given twice, no final
    newline."""
    text = data.decode("utf-8")          # strict: raises on bad UTF-8
    assert text.endswith("\n"), "no final newline"
    families = {}
    done = set()                         # families whose samples ended
    current = None
    for no, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {no}: {line!r}"
        if line.startswith("#"):
            m = re.fullmatch(rf"# (HELP|TYPE) ({NAME}) (.*)", line)
            if not m:
                continue                 # a comment
            kind, name, rest = m.groups()
            fam = families.setdefault(name, {"samples": {}})
            key = kind.lower()
            assert key not in fam, f"second {kind} for {name}: {where}"
            if kind == "TYPE":
                assert rest in TYPES, where
                assert not fam["samples"], f"TYPE after samples: {where}"
            else:
                assert re.fullmatch(r"(?:[^\\]|\\[\\n])*", rest), where
                rest = unescape(rest, help_text=True)
            fam[key] = rest
            continue
        assert line.strip(), f"blank line {no}"
        m = SAMPLE.fullmatch(line)
        assert m, f"not a sample: {where}"
        name, labels_text = m.group("name"), m.group("labels") or ""
        value = float(m.group("value"))
        labels = {}
        for lm in LABEL.finditer(labels_text):
            assert lm.group(1) not in labels, f"label twice: {where}"
            labels[lm.group(1)] = unescape(lm.group(2))
        fam_name = family_of(name, families)
        if fam_name != current:
            assert fam_name not in done, \
                f"samples of {fam_name} not together: {where}"
            if current:
                done.add(current)
            current = fam_name
        fam = families.setdefault(fam_name, {"samples": {}})
        key = (name, tuple(sorted(labels.items())))
        assert key not in fam["samples"], f"series given twice: {where}"
        fam["samples"][key] = value
    return families


def test_the_parser_is_strict():
    good = (b'# HELP a_total Some \\\\ help\\n.\n# TYPE a_total counter\n'
            b'a_total{x="q\\"\\\\\\n",y="1"} 3\na_total 1.5\nb -Inf\n')
    fams = parse_exposition(good)
    assert fams["a_total"]["help"] == "Some \\ help\n."
    assert fams["a_total"]["samples"][
        ("a_total", (("x", 'q"\\\n'), ("y", "1")))] == 3
    assert fams["b"]["samples"][("b", ())] == -math.inf
    for bad in (b'a{x="\\q"} 1\n',             # not an escape
                b'a{x="\xff"} 1\n',            # not UTF-8
                b'a 1\nb 1\na 2\n',            # a family split
                b'a{x="1"} 1\na{x="1"} 2\n',   # a series twice
                b'a 1\n# TYPE a gauge\n',      # TYPE after samples
                b'# TYPE a gauge\n# TYPE a gauge\n',
                b'a 1',                        # no final newline
                b'a{x="1} 1\n', b'1a 1\n', b'a one\n', b'\n'):
        with pytest.raises((AssertionError, UnicodeDecodeError)):
            parse_exposition(bad)


# --- what the file must say ----------------------------------------------------

def source_rows(data):
    """wakeup_sources as a list of (name bytes, {column: int}), in order
    (names may repeat: a wake lock may be called "autosleep")."""
    assert data.startswith(SOURCES_HEADER)
    columns = SOURCES_HEADER.decode().split()[1:]
    rows = []
    for line in data[len(SOURCES_HEADER):].split(b"\n")[:-1]:
        fields = line.split(b"\t")
        fields = [f for f in fields if f]
        assert len(fields) == 10, line
        rows.append((fields[0].rstrip(b" "),
                     dict(zip(columns, (int(x) for x in fields[1:])))))
    return rows


def escape(value):
    return value.replace("\\", "\\\\").replace('"', '\\"') \
        .replace("\n", "\\n")


def labels_of(name, kind):
    try:
        text = escape(name.decode("utf-8"))
        extra = ""
    except UnicodeDecodeError:
        # Each byte that is not part of a valid sequence is one U+FFFD.
        text = escape(name.decode("utf-8", "replace"))
        extra = f',source_hex="{name.hex()}"'
    return f'{{source="{text}"{extra},kind="{kind}"}}'


def seconds(ms):
    return "%d.%03d" % (ms // 1000, ms % 1000)


def expected_exposition(pfs):
    """The file, as it must be, from wakeup_sources and suspend_stats
    (meaningful while no source is active: times stand still)."""
    rows = source_rows(pfs.read_all("wakeup_sources"))
    # The kernel's own "autosleep" source is registered first: the oldest
    # row but "deleted"; a wake lock may have either name.
    kinds = ["wake_lock"] * (len(rows) - 2) + ["autosleep", "deleted"]
    assert rows[-1][0] == b"deleted" and rows[-2][0] == b"autosleep"
    out = []
    for metric, column, type_, help_ in SOURCE_FAMILIES:
        out.append(f"# HELP {metric} {help_}\n# TYPE {metric} {type_}\n")
        for (name, st), kind in zip(rows, kinds):
            if column is None:
                value = "1" if st["active_since"] else "0"
            elif column in SECONDS_COLUMNS:
                value = seconds(st[column])
            else:
                value = str(st[column])
            out.append(f"{metric}{labels_of(name, kind)} {value}\n")
    active = sum(1 for _, st in rows if st["active_since"])
    out.append("# HELP powerfs_wakeup_sources_active Wakeup sources active "
               "now (events in progress).\n# TYPE "
               f"powerfs_wakeup_sources_active gauge\n"
               f"powerfs_wakeup_sources_active {active}\n")
    out.append("# HELP powerfs_suspend_success_total Suspends that succeeded "
               "(suspend_stats: success).\n# TYPE "
               "powerfs_suspend_success_total counter\n"
               f"powerfs_suspend_success_total "
               f"{pfs.stat('success')}\n")
    out.append("# HELP powerfs_suspend_failures_total Suspends that failed, "
               "by the step that failed (suspend_stats: failed_STEP; their "
               "sum is fail).\n# TYPE powerfs_suspend_failures_total "
               "counter\n")
    for step in STEPS:
        out.append(f'powerfs_suspend_failures_total{{step="{step}"}} '
                   f"{pfs.stat('failed_' + step)}\n")
    return "".join(out).encode()


def prom(pfs_dir):
    try:
        with open(os.path.join(pfs_dir, PROM), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def wait_for_file(pfs, metrics_dir, timeout=INTERVAL + 5):
    """Waits until the file says what the mount says; returns it."""
    want = [None]

    def same():
        want[0] = expected_exposition(pfs)
        return prom(metrics_dir) == want[0]
    if not wait_until(same, timeout=timeout, interval=0.05):
        got = prom(metrics_dir)
        assert got == want[0]
    return want[0]


# Odd names a wake lock may have: any bytes but whitespace (which ends the
# name).  A newline cannot be in one: the escape is checked by the unit
# test of the text (tests/unit/test-metrics.c).
ODD_NAMES = (b'q"uote', b"back\\slash", b"\\n", b'"', b"caf\xc3\xa9",
             b"bad\xff\xfe", b"deleted", b"autosleep", b"a{b=\"c\"}")


def scripted_run(p):
    """Timeouts, odd names, a collected lock (the "deleted" row), autosleep
    while a lock is held, a suspend that succeeds and one that fails."""
    # Collected at the 101st unlock (--wakelock-gc-seconds=0): its
    # statistics go to the "deleted" row.
    for _ in range(101):
        p.lock("gone")
        p.unlock("gone")
    assert b"gone" not in p.inactive()
    p.lock(*ODD_NAMES)
    p.write("wake_lock", b"timed 50000000")          # 50 ms
    assert wait_until(lambda: b"timed" not in p.active())
    p.write("autosleep", b"mem")                     # held: no suspend
    time.sleep(0.05)                 # prevent-suspend time, on purpose
    p.write("autosleep", b"off")
    p.unlock(*ODD_NAMES)
    # A suspend that succeeds, then one that fails: an event since the
    # wakeup_count read (the simulated backend counts it at "freeze").
    assert p.write("state", b"mem") == 3
    n = p.count()
    assert p.write("wakeup_count", b"%d" % n) == len(str(n))
    p.lock("late")
    p.unlock("late")
    with conftest.raises_errno(errno.EBUSY):
        p.write("state", b"mem")


ARGS = ("--simulate-sleep-ms=20", "--wakelock-gc-seconds=0")


@pytest.fixture
def metrics_dir(tmp_path):
    d = tmp_path / "prom"
    d.mkdir()
    return str(d)


def test_file_says_what_wakeup_sources_says(mount, metrics_dir):
    p = mount(f"--metrics-dir={metrics_dir}", *ARGS)
    first = wait_for_file(p, metrics_dir)
    assert b"kind=\"wake_lock\"" not in first
    scripted_run(p)
    data = wait_for_file(p, metrics_dir)
    assert p.stat("success") == 1 and p.stat("failed_freeze") == 1
    parse_exposition(data)
    # The odd names, spelled out rather than rebuilt.
    for line in (
            b'powerfs_wakeup_source_events_total{source="q\\"uote",'
            b'kind="wake_lock"} 1\n',
            b'powerfs_wakeup_source_events_total{source="back\\\\slash",'
            b'kind="wake_lock"} 1\n',
            b'powerfs_wakeup_source_events_total{source="\\\\n",'
            b'kind="wake_lock"} 1\n',
            b'powerfs_wakeup_source_events_total{source="\\"",'
            b'kind="wake_lock"} 1\n',
            b'powerfs_wakeup_source_events_total{source="caf\xc3\xa9",'
            b'kind="wake_lock"} 1\n',
            b'powerfs_wakeup_source_events_total{source="bad\xef\xbf\xbd'
            b'\xef\xbf\xbd",source_hex="626164fffe",kind="wake_lock"} 1\n',
            b'powerfs_wakeup_source_events_total{source="deleted",'
            b'kind="wake_lock"} 1\n',
            b'powerfs_wakeup_source_events_total{source="deleted",'
            b'kind="deleted"} 101\n',
            b'powerfs_wakeup_source_events_total{source="autosleep",'
            b'kind="wake_lock"} 1\n',
            b'powerfs_wakeup_source_events_total{source="autosleep",'
            b'kind="autosleep"} 2\n',
            b'powerfs_wakeup_source_events_total{source="a{b=\\"c\\"}",'
            b'kind="wake_lock"} 1\n',
            b'powerfs_wakeup_source_expirations_total{source="timed",'
            b'kind="wake_lock"} 1\n',
            b'powerfs_suspend_success_total 1\n',
            b'powerfs_suspend_failures_total{step="freeze"} 1\n',
            b'powerfs_wakeup_sources_active 0\n'):
        assert line in data, line
    # Held through autosleep: prevent_suspend_time is not zero.
    m = re.search(rb'powerfs_wakeup_source_prevent_suspend_seconds_total'
                  rb'\{source="q\\"uote",kind="wake_lock"\} (\S+)\n', data)
    assert m and float(m.group(1)) >= 0.04, data


def test_active_source_and_gauge(mount, metrics_dir):
    p = mount(f"--metrics-dir={metrics_dir}", *ARGS)
    p.lock("held")

    def shows_held():
        data = prom(metrics_dir) or b""
        return (b'powerfs_wakeup_source_active{source="held",'
                b'kind="wake_lock"} 1\n' in data and
                b"powerfs_wakeup_sources_active 1\n" in data)
    assert wait_until(shows_held, timeout=INTERVAL + 5)
    parse_exposition(prom(metrics_dir))
    p.unlock("held")
    wait_for_file(p, metrics_dir)


def inodes_seen(path, seconds):
    """The versions of path seen by polling it (a rename makes a new
    inode); polling can miss versions, never invent them."""
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ino = os.stat(path).st_ino
        except FileNotFoundError:
            ino = None
        if not seen or seen[-1] != ino:
            seen.append(ino)
        time.sleep(0.005)
    return seen


def test_at_most_one_write_per_interval(mount, metrics_dir):
    p = mount(f"--metrics-dir={metrics_dir}", *ARGS)
    path = os.path.join(metrics_dir, PROM)
    wait_for_file(p, metrics_dir)
    stop = []

    def churn():
        while not stop:
            p.lock("churn")
            p.unlock("churn")
    t = threading.Thread(target=churn)
    t.start()
    try:
        seen = inodes_seen(path, 1.5 * INTERVAL)
    finally:
        stop.append(True)
        t.join()
    # Busy all along: a write at once after the quiet start, then one at
    # most every INTERVAL.
    assert 2 <= len(seen) <= 3, seen
    wait_for_file(p, metrics_dir)


def test_idle_means_no_wakeups(mount, metrics_dir):
    """After the write that follows a change, nothing runs: no timer, and
    the writer thread waits without a timeout."""
    p = mount(f"--metrics-dir={metrics_dir}", *ARGS)
    pid = p.server_pid()
    p.lock("x")
    p.unlock("x")
    wait_for_file(p, metrics_dir)
    # The timer and the writer are done when the file is there; the closes
    # (RELEASE) are processed once every thread sleeps.
    assert wait_until(lambda: conftest.all_asleep(p.pids()))
    before = thread_switches(pid)
    time.sleep(3)            # no wake-up in a window of 3 s
    assert thread_switches(pid) - before == 0


def test_removed_at_a_clean_end(mount, metrics_dir):
    p = mount(f"--metrics-dir={metrics_dir}", *ARGS)
    assert wait_until(lambda: prom(metrics_dir) is not None)
    p.stop()
    p.stop = lambda: None
    assert os.listdir(metrics_dir) == []


def test_a_failing_write_is_said_once_and_its_end_too(mount, metrics_dir):
    p = mount(f"--metrics-dir={metrics_dir}", *ARGS)
    wait_for_file(p, metrics_dir)
    shutil.rmtree(metrics_dir)
    for i in range(3):              # three writes that fail
        p.lock(f"lost{i}")
        p.unlock(f"lost{i}")
        assert wait_until(lambda: p.log().count("metrics: cannot write")
                          == 1, timeout=INTERVAL + 5)
        time.sleep(INTERVAL)    # the next write in an interval of its own
    assert p.log().count(f"metrics: cannot write {metrics_dir}/{PROM}: "
                         "No such file or directory") == 1
    os.mkdir(metrics_dir)
    p.lock("back")
    p.unlock("back")
    wait_for_file(p, metrics_dir)
    assert wait_until(lambda: f"metrics: {metrics_dir}/{PROM} written again"
                      in p.log())
    assert p.log().count("metrics: cannot write") == 1


@pytest.mark.parametrize("how", ["crash", "upgrade"])
def test_a_new_server_writes_the_file_at_its_start(mount, metrics_dir, how):
    """After a crash (SIGKILL to the server) or an upgrade (SIGHUP to the
    keeper) the file stays, and the next server writes it again at once,
    from the state it restored."""
    p = mount(f"--metrics-dir={metrics_dir}", *ARGS)
    p.lock("kept")
    p.unlock("kept")
    wait_for_file(p, metrics_dir)
    ino = os.stat(os.path.join(metrics_dir, PROM)).st_ino
    server = p.server_pid()
    if how == "crash":
        os.kill(server, signal.SIGKILL)
    else:
        os.kill(p.proc.pid, signal.SIGHUP)
    assert wait_until(lambda: not os.path.exists(f"/proc/{server}"))
    assert wait_until(lambda: p.server_pid() != server)

    def rewritten():
        st = os.stat(os.path.join(metrics_dir, PROM))
        return st.st_ino != ino
    assert wait_until(rewritten)
    assert b'{source="kept",kind="wake_lock"} 1\n' in prom(metrics_dir)
    wait_for_file(p, metrics_dir)


@pytest.mark.parametrize("case", ["missing", "file", "mountpoint",
                                  "read-only"])
def test_unusable_dir_is_refused(tmp_path, case):
    """Refused before anything is mounted, with a clear error."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    d = tmp_path / "d"
    argv = [conftest.POWERFS, "-f", None, str(mnt)]
    if case == "missing":
        want = f"--metrics-dir: {d}: No such file or directory"
    elif case == "file":
        d.write_text("")
        want = f"--metrics-dir: {d} is not a directory"
    elif case == "mountpoint":
        d = mnt
        want = f"--metrics-dir: {d} is inside the mount point {mnt}"
    else:
        d.mkdir()
        want = f"--metrics-dir: cannot write in {d}: Read-only file system"
        # A read-only mount of its own, in a mount namespace of its own.
        argv = ["unshare", "-m", "sh", "-c",
                'mount -t tmpfs -o ro none "$1" && shift && exec "$@"',
                "sh", str(d)] + argv
    argv[argv.index(None)] = f"--metrics-dir={d}"
    r = subprocess.run(argv, capture_output=True, timeout=10)
    assert r.returncode == 2, r
    assert r.stderr.decode() == f"powerfs: {want}\n"
    assert not os.path.ismount(mnt)


@pytest.mark.parametrize("form", ["--metrics-dir=rel", "--metrics-dir rel"])
def test_relative_dir_in_background_mode(tmp_path, form):
    """A daemon works from "/", and its server is the keeper's child, which
    parses the arguments again: both must get the directory's real path."""
    (tmp_path / "rel").mkdir()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        r = subprocess.run([conftest.POWERFS, *form.split(),
                            "--simulate-sleep-ms=10", str(mnt)],
                           cwd=tmp_path, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=10)
        assert r.returncode == 0, r
        assert os.path.ismount(mnt)
        assert wait_until(lambda: prom(tmp_path / "rel") is not None)
        assert parse_exposition(prom(tmp_path / "rel"))
    finally:
        subprocess.run([conftest.FUSERMOUNT, "-u", str(mnt)],
                       capture_output=True)
    # Removed by the server at its clean end.
    assert wait_until(lambda: prom(tmp_path / "rel") is None)


# --- node_exporter ---------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=5) as r:
        return r.read()


@pytest.fixture
def node_exporter(tmp_path):
    if not os.access(NODE_EXPORTER, os.X_OK):
        pytest.fail(f"{NODE_EXPORTER} missing: run scripts/install-deps.sh")
    procs = []

    def start(textfile_dir):
        for _ in range(5):          # a port taken meanwhile: another one
            port = free_port()
            log = open(tmp_path / "node_exporter.log", "wb")
            proc = subprocess.Popen(
                [NODE_EXPORTER, "--collector.disable-defaults",
                 "--collector.textfile",
                 f"--collector.textfile.directory={textfile_dir}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
            procs.append(proc)

            def up():
                try:
                    return scrape(port)
                except OSError:
                    return None
            if wait_until(lambda: up() or proc.poll() is not None,
                          timeout=10) and proc.poll() is None:
                return port
        pytest.fail("node_exporter did not start: "
                    + (tmp_path / "node_exporter.log").read_text())
    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def without_empty_labels(samples):
    return {(name, tuple(kv for kv in labels if kv[1])): value
            for (name, labels), value in samples.items()}


def test_node_exporter_serves_the_same_values(mount, metrics_dir,
                                              node_exporter):
    p = mount(f"--metrics-dir={metrics_dir}", *ARGS)
    scripted_run(p)
    ours = parse_exposition(wait_for_file(p, metrics_dir))
    port = node_exporter(metrics_dir)
    theirs = parse_exposition(scrape(port))
    # No error reading the file, and its time is there.
    errors = theirs["node_textfile_scrape_error"]["samples"]
    assert errors == {("node_textfile_scrape_error", ()): 0.0}
    mtime = theirs["node_textfile_mtime_seconds"]["samples"]
    assert list(mtime) == [("node_textfile_mtime_seconds",
                            (("file", os.path.join(metrics_dir, PROM)),))] \
        or list(mtime) == [("node_textfile_mtime_seconds",
                            (("file", PROM),))]
    # Every family with its type, help and every sample with its value.
    assert sum(len(f["samples"]) for f in ours.values()) == \
        (len(SOURCE_FAMILIES) * (len(ODD_NAMES) + 4) + 1 + 1 + len(STEPS))
    for name, fam in ours.items():
        assert theirs[name]["type"] == fam["type"], name
        assert theirs[name]["help"] == fam["help"], name
        # node_exporter gives every series of a family the same label
        # names, adding source_hex="" where the file has none: the same
        # series to Prometheus, for which an empty label is no label.
        assert without_empty_labels(theirs[name]["samples"]) == \
            fam["samples"], name
    # The non-UTF-8 name came through as U+FFFD with its bytes in hex.
    key = ("powerfs_wakeup_source_events_total",
           (("kind", "wake_lock"), ("source", "bad\ufffd\ufffd"),
            ("source_hex", "626164fffe")))
    assert theirs["powerfs_wakeup_source_events_total"]["samples"][key] == 1
