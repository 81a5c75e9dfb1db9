"""Android's clients of /sys/power, replayed against powerfs.

Each scenario runs tests/android/client.py inside scripts/powerfs-container
(a private mount namespace with a fresh powerfs bound over /sys/power,
mounted allow_other).  The script plays init (chown/chmod/write of init.rc),
then forks children with Android's uids, groups and capabilities that
replay the client's system calls exactly and report what each returned as
one JSON line; the tests here compare that with SPEC.md and, where SPEC.md
has no rule for the pattern, with the kernel.

The clients:
  - libhardware_legacy (Android <= 9): wake_lock/wake_unlock opened once
    O_RDWR, bare names written for the life of the process, never a seek;
  - the suspend loop (libsuspend 4.4-9, SystemSuspend 10+): state and
    wakeup_count kept O_RDWR, lseek(0), read the count, write it back on the
    same fd, write "mem";
  - libsuspend's probes (4.2-7.1): "on" to state, autosleep (4.2-4.4);
  - SystemSuspend 10 (every wake lock a write) and 11+ (suspend_stats/*,
    /sys/class/wakeup/*);
  - BatteryStats' KernelWakelockReader (one 8 KiB read of wakeup_sources,
    parsed with Process.parseProcLine);
  - a container freezer (lxc-freeze) with the suspend thread blocked in its
    wakeup_count read.
"""

import atexit
import errno
import importlib.util
import json
import os
import platform
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import conftest
from conftest import STATS_FILES, wait_until

CONTAINER = str(conftest.REPO / "scripts" / "powerfs-container")
# A read that must not wait returns within this (a waiting one takes until
# the unlock, seconds later).
AT_ONCE = 0.1 * conftest.TIME_SCALE
_SOURCE = Path(__file__).resolve().parent / "android" / "client.py"


def _world_readable_copy(src):
    """Android's uids re-exec the client script: the checkout may sit in a
    directory they cannot enter (a 0700 mktemp, /root), so they run a copy
    from a 0755 directory of its own."""
    d = tempfile.mkdtemp(prefix="powerfs-android-")
    os.chmod(d, 0o755)
    dst = os.path.join(d, src.name)
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)
    atexit.register(shutil.rmtree, d, True)
    return dst


CLIENT = _world_readable_copy(_SOURCE)
PYTHON = "/usr/bin/python3"
SIM = "--powerfs-opt=--simulate-sleep-ms=50"

_spec = importlib.util.spec_from_file_location("android_client", CLIENT)
client = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(client)
NAMES = [n.decode() for n in client.NAMES]
COUNT = re.compile(r"(0|[1-9][0-9]*)\n")


def replay(scenario, *args, opts=(SIM,), timeout=25):
    """Run one scenario in a fresh container; returns its JSON result."""
    proc = subprocess.Popen(
        [CONTAINER, *opts, "--", PYTHON, CLIENT, scenario, *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, POWERFS=conftest.POWERFS),
        start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout * conftest.TIME_SCALE)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{scenario} still running after {timeout}s\n{stderr}")
    assert proc.returncode == 0, \
        f"{scenario} exited with {proc.returncode}:\n{stderr}\n{stdout}"
    lines = stdout.splitlines()
    assert lines, f"{scenario} printed nothing:\n{stderr}"
    return json.loads(lines[-1])


def check_init(steps):
    """Every line of init.rc worked: chown/chmod return 0, the write of
    zygote_kwl (O_WRONLY|O_CREAT|O_TRUNC|O_NOFOLLOW) its full length."""
    for step, res in steps.items():
        if step.startswith("write "):
            assert res == len("zygote_kwl"), (step, res)
        elif step.startswith("release "):
            assert res == [len("zygote_kwl")], (step, res)
        else:
            assert res == 0, (step, res)


def listing(names):
    return " ".join(sorted(names, key=str.encode)) + "\n"


# --- init and who may open what ------------------------------------------------------

ALL_OK = {k: "ok" for k in ("wake_lock O_RDWR", "wake_lock O_WRONLY",
                            "wake_lock O_RDONLY", "wake_unlock O_RDWR",
                            "state O_RDWR", "state O_RDONLY",
                            "wakeup_count O_RDWR", "wakeup_count O_RDONLY",
                            "autosleep O_WRONLY", "autosleep O_RDONLY",
                            "suspend_stats/success O_RDONLY")}
RADIO = dict(ALL_OK, **{"state O_RDWR": "EACCES", "state O_RDONLY": "EACCES",
                        "wakeup_count O_RDWR": "EACCES",
                        "autosleep O_WRONLY": "EACCES"})
APP = dict(RADIO, **{"wake_lock O_RDWR": "EACCES",
                     "wake_lock O_WRONLY": "EACCES",
                     "wake_lock O_RDONLY": "EACCES",
                     "wake_unlock O_RDWR": "EACCES"})


def test_init_chown_chmod_write_then_access():
    r = replay("init_permissions")
    check_init(r["init"])
    assert r["stat"] == {
        "wake_lock": ["0o660", 1001, 3010, 4096],
        "wake_unlock": ["0o660", 1001, 3010, 4096],
        "state": ["0o660", 1000, 1000, 4096],
        "wakeup_count": ["0o644", 1000, 1000, 4096],
        "autosleep": ["0o644", 1000, 1000, 4096],
    }
    assert r["listing"] == "zygote_kwl\n"
    # system_server: uid system, wakelock among its groups.
    assert r["system"] == ALL_OK
    # rild: the owner of wake_lock/wake_unlock.
    assert r["radio"] == RADIO
    # An app: neither owner nor in group wakelock.
    assert r["app"] == APP


# --- libhardware_legacy (Android <= 9) ----------------------------------------------

@pytest.mark.parametrize("who", ["system_server", "rild"])
def test_libhardware_legacy_kept_fds(who):
    """3500 lock/unlock pairs on the two fds opened once: every write
    returns its full length, the offsets grow past 64 KiB, the locks take
    effect whatever the offset."""
    r = replay("legacy", who, 3500)
    check_init(r["init"])
    c = r["client"]
    caps = c["caps"]
    assert caps["CapEff"], caps
    # system_server keeps the capability through setuid; rild gets it
    # ambient from init.
    assert caps["CapAmb"] == (who == "rild"), caps
    assert c["bad"] == [], "writes that did not return their length " \
        "[iteration, fd (0 lock, 1 unlock), name, result, offset]: " \
        f"{c['bad']}"
    assert c["missing"] == [], "locks missing from the listing " \
        f"[iteration, offset, listing]: {c['missing']}"
    assert c["twice"] == [5, 5, 5]
    # The offsets are the sums of the counts (no seek, never reset).
    assert c["pos"] == [c["written"][0] + 10, c["written"][1] + 5]
    assert min(c["pos"]) > 65536, c["pos"]
    # Past 2^31 and 2^32 the writes still work and return their length.
    first4 = NAMES[:4]
    for ll in c["long_life"]:
        assert ll["steps"] == [[len(n), True, len(n)] for n in first4], ll
        assert ll["advanced"] == [sum(map(len, first4))] * 2, ll
    # Not reference counted: two locks, one unlock, nothing active.
    assert c["listing"] == "\n"
    assert c["unlisting"] == listing(NAMES + ["twice", "zygote_kwl"])


def test_wake_lock_without_cap_block_suspend_is_eperm():
    """uid system in group wakelock may open the files (mode 0660) but,
    without CAP_BLOCK_SUSPEND (setuid without keeping caps), every write is
    EPERM, "\\n" included (checked before parsing)."""
    r = replay("nocap")
    check_init(r["init"])
    s = r["system"]
    assert not any(s["caps"].values()), s["caps"]
    assert (s["lock"], s["unlock"]) == ("EPERM", "EPERM")
    assert (s["lock_newline"], s["unlock_newline"]) == ("EPERM", "EPERM")
    assert s["listing"] == s["listing_after"] == "\n"
    assert r["app"] == APP


def test_no_capability_check_option():
    r = replay("nocap", opts=(SIM, "--powerfs-opt=--no-capability-check"))
    check_init(r["init"])
    s = r["system"]
    assert not any(s["caps"].values()), s["caps"]
    name = "PowerManagerService.WakeLocks"
    assert s["lock"] == len(name)
    assert s["listing"] == name + "\n"
    assert s["unlock"] == len(name)
    assert s["listing_after"] == "\n"
    # Now parsed: an empty name.
    assert (s["lock_newline"], s["unlock_newline"]) == ("EINVAL", "EINVAL")
    # The modes still hold.
    assert r["app"] == APP


# --- the suspend loop ------------------------------------------------------------------

STYLES = ["libsuspend", "readfdtostring", "systemsuspend"]


def check_reads(style, reads, count=None):
    """The read(s) of one cycle: a count, then (reading until EOF) a read
    at the end offset that returns 0 at once."""
    data = reads[0][0]
    assert COUNT.fullmatch(data), reads
    if count is not None:
        assert int(data) == count, reads
    if style == "readfdtostring":
        assert len(reads) == 2 and reads[1][0] == "", reads
        assert reads[1][1] < AT_ONCE, \
            f"read at the end offset took {reads[1][1]}s"
    else:
        assert len(reads) == 1, reads
    return int(data)


def payload(style, count):
    """What the client writes back."""
    return str(count) if style == "readfdtostring" else f"{count}\n"


@pytest.mark.parametrize("style", STYLES)
def test_suspend_loop_cycles(style):
    r = replay("suspend_loop", style, 3)
    check_init(r["init"])
    lp = r["loop"]
    assert lp["size"] == 4096          # what ReadFdToString reserves
    last = 0
    for cyc in lp["cycles"]:
        n = check_reads(style, cyc["reads"])
        assert n >= last
        last = n
        wb = payload(style, n)
        assert cyc["writeback"] == len(wb), cyc
        # The write-back went at the offset the read left.
        assert cyc["pos_after_writeback"] == len(f"{n}\n") + len(wb), cyc
        mem, secs = cyc["mem"]
        assert mem == 3, cyc
        assert secs >= 0.04, f"'mem' returned before the simulated sleep: {cyc}"
    before, after = lp["before"], lp["after"]
    assert int(after["success"]) == int(before["success"]) + 3, (before, after)
    assert after["fail"] == before["fail"] == "0\n"


@pytest.mark.parametrize("style", STYLES)
def test_count_read_blocks_while_a_lock_is_held(style):
    """PowerManagerService holds a lock: the suspend thread's read blocks
    (no spinning), and returns the new count once the lock goes."""
    r = replay("blocking", style)
    check_init(r["init"])
    lp = r["loop"]
    assert lp["first"]["mem"][0] == 3, lp["first"]
    assert lp["lock"] == lp["unlock"] == [len("PowerManagerService.WakeLocks")]
    assert lp["blocked_after_0.3s"], \
        f"the count read returned with a lock held: {lp.get('reads')}"
    assert lp["cpu_while_blocked"] < 0.15, lp["cpu_while_blocked"]
    assert lp["returned"], "the count read still blocked 5 s after the unlock"
    assert lp["latency_after_unlock"] < 1.0, lp["latency_after_unlock"]
    check_reads(style, lp["reads"], count=lp["c0"] + 1)
    assert lp["writeback"] == len(payload(style, lp["c0"] + 1)), lp
    assert lp["mem"][0] == 3, lp


def test_handshake_stale_count_and_late_lock():
    # A long simulated sleep, so that "failed without sleeping" is clear.
    r = replay("handshake", opts=("--powerfs-opt=--simulate-sleep-ms=400",))
    check_init(r["init"])
    lp = r["loop"]
    a = int(lp["A_count"])
    # An event between the read and the write-back: stale -> EINVAL.
    assert lp["A_event"] == [len("NetworkStats")] * 2
    assert lp["A_writeback"] == "EINVAL"
    # A lock taken after the write-back: "mem" -> EBUSY, without sleeping.
    assert lp["B_count"] == f"{a + 1}\n"
    assert lp["B_writeback"] == len(lp["B_count"])
    assert lp["B_lock"] == [len("AudioMix")]
    mem, secs = lp["B_mem"]
    assert mem == "EBUSY", lp["B_mem"]
    assert secs < 0.3, f"'mem' slept before failing: {secs}s"
    before, after = lp["B_stats"]
    assert int(after["fail"]) == int(before["fail"]) + 1
    assert int(after["failed_freeze"]) == int(before["failed_freeze"]) + 1
    assert after["success"] == before["success"]
    assert after["last_failed_errno"] == "-16\n"
    assert after["last_failed_step"] == "freeze\n"
    # An event (lock and unlock) after the write-back: the count moved.
    assert lp["C_count"] == f"{a + 2}\n"
    assert lp["C_writeback"] == len(lp["C_count"])
    assert lp["C_mem"][0] == "EBUSY", lp["C_mem"]
    # And a clean cycle goes through again.
    assert lp["D_count"] == f"{a + 3}\n"
    assert lp["D"]["writeback"] == len(lp["D_count"])
    assert lp["D"]["mem"][0] == 3, lp["D"]
    before, after = lp["D_stats"]
    assert int(after["success"]) == int(before["success"]) + 1


def test_read_until_eof_returns_0_at_once_even_with_a_lock():
    """ReadFdToString: after the count, the read at the end offset returns
    0 at once (it is served from the snapshot), even though a lock was
    taken in between; the stale-by-lock write-back fails like the
    kernel's (events in progress), and the next cycle works."""
    r = replay("eof")
    check_init(r["init"])
    c = r["client"]
    assert c["size"] == 4096
    data, secs = c["first"]
    assert COUNT.fullmatch(data), c
    n = int(data)
    assert c["lock"] == c["unlock"] == [len("SensorService_wakelock")]
    for data, secs in c["at_end"]:
        assert data == "", c["at_end"]
        assert secs < AT_ONCE, f"read at the end offset blocked {secs}s"
    assert c["writeback_with_lock"] == "EINVAL"
    nxt = c["next"]
    assert nxt["count"] == str(n + 1)
    check_reads("readfdtostring", nxt["reads"], count=n + 1)
    assert nxt["writeback"] == len(str(n + 1))
    assert nxt["mem"] == 3


# --- libsuspend's probes: early suspend, autosleep (4.2-7.1) -------------------------

def test_early_suspend_probe_and_autosleep():
    r = replay("early_suspend_autosleep")
    check_init(r["init"])
    c = r["client"]
    # "on" must fail, and the fb files be absent, or Android picks early
    # suspend.
    assert c["on"] == "EINVAL"
    assert c["wait_for_fb"] == ["ENOENT", "ENOENT"]
    # autosleep on the kept O_WRONLY fd.
    assert (c["off0"], c["mem"]) == (3, 3)
    assert c["autosleep_on"] == "mem\n"
    s0, s1, secs = c["success_grew"]
    assert s1 >= s0 + 2, f"autosleep suspended {s1 - s0} times in {secs}s"
    assert c["wakeup_count_write"] == c["state_write"] == "EBUSY"
    assert c["mem_again"] == 3
    assert c["lock"] == c["unlock"] == [len("PowerManagerService.Display")]
    a, b = c["success_with_lock"]
    assert a == b, f"autosleep suspended {b - a} times with a lock held"
    assert c["off"] == 3
    assert c["off_seconds"] < 1.0
    assert c["autosleep_off"] == "off\n"
    assert c["pos"] == 12              # four writes, never a seek


# --- SystemSuspend -------------------------------------------------------------------

def test_android10_systemsuspend_writes_every_lock():
    r = replay("android10")
    check_init(r["init"])
    s = r["service"]
    assert s["caps"]["CapAmb"] and s["caps"]["CapEff"], s["caps"]
    assert s["acquire"] == [len(n) for n in NAMES]
    assert s["acquire_again"] == len(NAMES[0])
    assert s["listing"] == listing(NAMES)
    assert s["release"] == [len(n) for n in NAMES]
    assert s["release_again"] == len(NAMES[0])
    assert s["listing_after"] == "\n"
    assert s["unlisting"] == listing(NAMES + ["zygote_kwl"])
    total = sum(len(n) for n in NAMES) + len(NAMES[0])
    assert s["pos"] == [total, total]


def help_text():
    return subprocess.run([conftest.POWERFS, "--help"], capture_output=True,
                          text=True, timeout=10).stdout


CLASS_FILES = {"name", "active_count", "event_count", "wakeup_count",
               "expire_count", "active_time_ms", "total_time_ms",
               "max_time_ms", "last_change_ms", "prevent_suspend_time_ms"}


def test_android11_suspend_stats_and_class_wakeup():
    # The option is part of the product: a rename must fail here, not skip.
    assert "--class-wakeup=DIR" in help_text()
    if os.path.isdir("/sys/class/wakeup"):
        r = replay("android11", opts=(SIM, "--class-wakeup"))
    else:
        # powerfs-container --class-wakeup cannot bind over a directory
        # the host lacks (see test_container_class_wakeup_option): give
        # powerfs the directory and let the script show it there.
        with tempfile.TemporaryDirectory(prefix="powerfs-android-") as d:
            os.chmod(d, 0o755)
            r = replay("android11", d,
                       opts=(SIM, f"--powerfs-opt=--class-wakeup={d}"))
    check_init(r["init"])
    s = r["service"]
    assert s["caps"]["CapAmb"], s["caps"]
    assert s["locks"] == [29, 29, 7, 7]
    assert s["cycle"]["mem"][0] == 3, s["cycle"]

    st = s["suspend_stats"]
    assert set(st) == set(STATS_FILES)
    assert st["success"] == "1\n"
    for name in conftest.STATS_COUNTERS[1:]:
        assert st[name] == "0\n", (name, st[name])
    assert st["last_failed_errno"] == "0\n"
    assert st["last_failed_dev"] == st["last_failed_step"] == "\n"

    by_name = {}
    for d, entry in s["class_wakeup"].items():
        assert re.fullmatch(r"wakeup\d+", d), d
        assert set(entry) == CLASS_FILES, (d, entry)
        assert entry["name"].endswith("\n") and "\n" not in entry["name"][:-1]
        # What SystemSuspend does: drop the newline, ParseInt.
        values = {}
        for k, v in entry.items():
            if k != "name":
                assert COUNT.fullmatch(v), (d, k, v)
                values[k] = int(v)
        by_name[entry["name"][:-1]] = values
    assert set(by_name) == {"autosleep", "zygote_kwl",
                            "PowerManagerService.WakeLocks", "*alarm*"}
    pms = by_name["PowerManagerService.WakeLocks"]
    assert (pms["active_count"], pms["event_count"]) == (1, 1), pms
    assert pms["active_time_ms"] == 0, pms
    alarm = by_name["*alarm*"]
    assert alarm["active_count"] == 1, alarm
    assert alarm["active_time_ms"] >= 40, alarm          # held 50 ms


def test_container_class_wakeup_option():
    """scripts/powerfs-container --class-wakeup on a host without
    /sys/class/wakeup (a kernel without CONFIG_PM_SLEEP: a host that needs
    powerfs)."""
    # The option is part of the product: a rename must fail here, not skip.
    assert "--class-wakeup=DIR" in help_text()
    if os.path.isdir("/sys/class/wakeup"):
        pytest.skip("the host has /sys/class/wakeup: covered by "
                    "test_android11_suspend_stats_and_class_wakeup")
    r = subprocess.run([CONTAINER, "--class-wakeup", "--", "cat",
                        "/sys/class/wakeup/wakeup0/name"],
                       capture_output=True, text=True, timeout=20,
                       env=dict(os.environ, POWERFS=conftest.POWERFS))
    assert (r.returncode, r.stdout) == (0, "autosleep\n"), r.stderr


# --- BatteryStats' KernelWakelockReader ------------------------------------------------

PROC_TERM_MASK = 0xff
PROC_COMBINE = 0x100
PROC_OUT_STRING = 0x1000
PROC_OUT_LONG = 0x2000
TAB = ord("\t")
WAKEUP_SOURCES_FORMAT = [
    TAB | PROC_OUT_STRING,                       # 0: name
    TAB | PROC_COMBINE | PROC_OUT_LONG,          # 1: count
    TAB | PROC_COMBINE,
    TAB | PROC_COMBINE,
    TAB | PROC_COMBINE,
    TAB | PROC_COMBINE,
    TAB | PROC_COMBINE | PROC_OUT_LONG,          # 6: totalTime
]


def strtoll(b):
    m = re.match(rb"\s*([+-]?\d+)", b)
    return int(m.group(1)) if m else 0


def parse_proc_line(buf, i, end, fmt):
    """android_util_Process.cpp parseProcLineArray (no parens/quotes)."""
    strings, longs = {}, {}
    di = 0
    for mode in fmt:
        term = mode & PROC_TERM_MASK
        if i >= end:
            return False, strings, longs            # "Ran off end of data"
        start = i
        while i < end and buf[i] != term:
            i += 1
        stop = i
        if i < end:
            i += 1
            if mode & PROC_COMBINE:
                while i < end and buf[i] == term:
                    i += 1
        if mode & (PROC_OUT_LONG | PROC_OUT_STRING):
            if mode & PROC_OUT_LONG:
                longs[di] = strtoll(buf[start:stop])
            if mode & PROC_OUT_STRING:
                strings[di] = buf[start:stop].decode("utf-8", "replace")
            di += 1
    return True, strings, longs


def kernel_wakelock_reader(buf):
    """KernelWakelockReader.parseProcWakelocks for wakeup_sources: skip
    the header line, parse every complete line; returns name -> (count,
    totalTime in us) and the lines that failed to parse."""
    n = len(buf)
    i = 0
    while i < n and buf[i] not in (10, 0):
        i += 1
    start = end = i + 1
    rows, failed = {}, []
    while end < n:
        end = start
        while end < n and buf[end] not in (10, 0):
            end += 1
        if end > n - 1:
            break
        line = bytes(b if b < 0x80 else ord("?") for b in buf[start:end])
        parsed, strings, longs = parse_proc_line(line, 0, len(line),
                                                 WAKEUP_SOURCES_FORMAT)
        if parsed:
            name = strings[0].strip()
            if name:
                rows[name] = (longs[1], longs[2] * 1000)
        else:
            failed.append(line)
        start = end + 1
    return rows, failed


def test_batterystats_single_8k_read_parses():
    r = replay("batterystats", 60, opts=(SIM, "--debugfs"))
    check_init(r["init"])
    c = r["client"]
    long_name = NAMES[8]
    assert c["locks"] == [29, 29, 1, 1, 1, 1, len(long_name),
                          len(long_name), 7, 7]
    data = c["data"].encode("latin-1")
    # The whole file came in the one read, ending with a complete line.
    assert len(data) < 8192 and data.endswith(b"\n"), data[-200:]
    assert data.startswith(conftest.SOURCES_HEADER)
    lines = data.split(b"\n")[1:-1]
    # The kernel's layout: name padded to 12, one tab, nine numbers.
    for line in lines:
        assert re.fullmatch(rb"[^\t]{12,}\t-?\d+(\t\t-?\d+){8}", line), line
    rows, failed = kernel_wakelock_reader(data)
    assert failed == []
    assert len(rows) == len(lines)
    assert set(rows) == {"PowerManagerService.WakeLocks", "a", long_name,
                         "*alarm*", "zygote_kwl", "autosleep", "deleted"}
    pms_count, pms_us = rows["PowerManagerService.WakeLocks"]
    assert pms_count == 1
    assert 55_000 <= pms_us < 5_000_000, pms_us       # held 60 ms
    assert rows["a"][0] == 2
    assert rows[long_name][0] == 1
    assert rows["*alarm*"][0] == 1                    # active while read
    assert rows["zygote_kwl"][0] == 1
    assert rows["autosleep"] == (0, 0)


# --- freezing a container (lxc-freeze) ---------------------------------------------------

READ_SYSCALLS = {"x86_64": ("0",), "aarch64": ("63",)}


def in_read(pid):
    nums = READ_SYSCALLS.get(platform.machine())
    try:
        with open(f"/proc/{pid}/syscall") as f:
            first = f.read().split(" ", 1)[0]
    except OSError:
        return False
    return nums is None or first in nums


def cg_write(path, value):
    with open(path, "w") as f:
        f.write(value)


def cg_read(path):
    with open(path) as f:
        return f.read().strip()


def test_freezer_with_reader_blocked_in_wakeup_count(mount):
    """Android freezes apps with the cgroup v1 freezer."""
    with conftest.freezer_root("v1") as root:
        freeze_a_blocked_reader(mount, root)


def freeze_a_blocked_reader(mount, root):
    p = mount("--simulate-sleep-ms=50")
    n = p.count()
    p.lock("frz")
    cg = os.path.join(root, f"powerfs-test-android-{uuid.uuid4().hex[:12]}")
    proc = subprocess.Popen([PYTHON, CLIENT, "blocked_reader",
                             p.path("wakeup_count")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    os.mkdir(cg)
    try:
        fd = proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], 10)
        assert ready and proc.stdout.readline() == b"ready\n", \
            proc.stderr.read() if proc.poll() is not None else "no ready"
        assert wait_until(lambda: in_read(proc.pid), timeout=5), \
            "reader never entered read(2)"
        # Parked in powerfs, not only queued in the kernel.
        assert wait_until(lambda: conftest.taken(proc.pid, p), timeout=5), \
            "powerfs never took the blocked read"
        cg_write(os.path.join(cg, "cgroup.procs"), str(proc.pid))
        t0 = time.monotonic()
        cg_write(os.path.join(cg, "freezer.state"), "FROZEN")
        frozen = wait_until(
            lambda: cg_read(os.path.join(cg, "freezer.state")) == "FROZEN",
            timeout=1.0)
        secs = time.monotonic() - t0
        assert frozen, ("freezer.state still "
                        f"{cg_read(os.path.join(cg, 'freezer.state'))} after "
                        f"{secs:.2f}s: the blocked read keeps the task from "
                        "freezing")
        cg_write(os.path.join(cg, "freezer.state"), "THAWED")
        assert wait_until(
            lambda: cg_read(os.path.join(cg, "freezer.state")) == "THAWED",
            timeout=2.0)
        # Thawed, the reader retries (TEMP_FAILURE_RETRY) and blocks again.
        ready, _, _ = select.select([fd], [], [], 0.3)
        assert not ready, "the read returned with the lock still held: " \
            + proc.stdout.readline().decode(errors="replace")
        p.unlock("frz")
        ready, _, _ = select.select([fd], [], [], 5)
        assert ready, "read still blocked 5 s after the unlock"
        res = json.loads(proc.stdout.readline())
        assert res["data"] == f"{n + 1}\n", res
        assert proc.wait(5) == 0
    finally:
        p.unlock("frz")
        try:
            if os.path.exists(cg):
                cg_write(os.path.join(cg, "freezer.state"), "THAWED")
                if proc.poll() is None:
                    cg_write(os.path.join(root, "cgroup.procs"),
                             str(proc.pid))
        finally:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            for f in (proc.stdout, proc.stderr):
                f.close()
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY:
                        raise
                    time.sleep(0.05)


# --- Android 12 and 13: SystemSuspend with wakeup_reasons ------------------------------

@pytest.mark.parametrize("era", ["counter", "kernel"])
def test_android13_systemsuspend_logs_no_error(era):
    """SystemSuspend as Android 12 and 13 run it, both ways it takes wake
    locks, with every kernel file it opens at start kept open: a few
    suspend cycles, one handshake lost to rild's late lock, then the
    statistics calls.  Nothing it would log as an error happens, and what
    it parses is what the Android common kernel gives it."""
    r = replay("android13", era,
               opts=("--powerfs-opt=--simulate-sleep-ms=200",
                     "--class-wakeup", "--wakeup-reasons"), timeout=60)
    check_init(r["init"])
    s = r["service"]
    assert s["errors"] == []
    assert s["caps"]["CapAmb"], s["caps"]
    # Nothing is attempted while the platform holds a wake lock.
    assert s["cycles_while_held"] == 0
    assert s["first"] and s["lost"] and s["done"]
    assert s["late_lock"] == {"lock": [15], "unlock": [15]}
    cycles = s["cycles"]
    lost = [c for c in cycles if not c["success"]]
    assert len(lost) == 1, cycles
    assert lost[0]["reasons"] == [
        "Abort: Pending Wakeup Sources: radio-interface"]
    assert lost[0]["slept"] == 0
    for c in cycles:
        if c["success"]:
            assert c["reasons"] == ["-1 simulated sleep ended"], c
            # The simulated sleep's length is the time asleep.
            assert 0.2 <= c["slept"] < 5 and 0 <= c["overhead"] < 5, c
    st = s["suspend_stats"]
    assert st["success"] == len(cycles) - 1
    assert (st["fail"], st["failed_freeze"]) == (1, 1)
    assert (st["last_failed_errno"], st["last_failed_step"]) == (-16,
                                                                 "freeze")
    # Every fd it opened at start still names its file (it re-opens the
    # reasons through /proc/self/fd when they were unknown).
    assert s["fd_paths"] == {p: p for p in s["fd_paths"]}
    assert len(s["fd_paths"]) == (8 if era == "kernel" else 7)
    names = set(s["kernel_wakelocks"])
    expect = {"autosleep", "zygote_kwl", "radio-interface"}
    if era == "kernel":
        expect |= {"PowerManagerService.Booting", "*alarm*",
                   "PowerManagerService.Display"}
    assert names == expect
