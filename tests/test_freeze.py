"""--backend=freeze:CGROUP: a container's own sleep, on real cgroups.

Every test runs twice: on cgroup v2 (a cgroup2 mount made for the test
module) and on the v1 freezer (its hierarchy where the host mounts it, or a
mount made here).  The "container" is a cgroup made for the test, its
processes started inside it; powerfs runs outside (the conftest harness, -d
so that its log says which way each sleep went).  Inside: Android's
SystemSuspend loop (tests/android/client.py, the files reached through the
mount's own paths), a process that counts in a loop and one waiting for its
CLOCK_BOOTTIME_ALARM timerfd.

What the tests assert on: the cgroup's own state files (frozen or not), the
tasks' CPU time (schedstat), what the clients' system calls returned, the
mount's files, and powerfs's log for the path the kernel made it take (the
writer inside the cgroup is interrupted by the freezer and answered then).
"""

import contextlib
import errno
import itertools
import json
import os
import re
import select
import signal
import subprocess
import tempfile
import time

import pytest

import conftest
from conftest import (POWERFS, PYTHON, ExtraMounts, Powerfs, _live, children,
                      kill_children, raises_errno, wait_until)
import test_android
import test_logind

# test_logind's fixtures, for the tests here that take them by name.
logind_factory = test_logind.logind_factory
logind = test_logind.logind

pytestmark = pytest.mark.timeout(90)

CLIENT = test_android.CLIENT
ALARM_LATE_MAX = 0.1        # the bound: woken within 100 ms of it
WAKE_MAX = 0.5              # a wakeup event thaws "at once": a deadline
TIMES = re.compile(r"([0-9]+\.[0-9]{9}) ([0-9]+\.[0-9]{9})\n")

_serial = itertools.count()

# A writer of state inside the cgroup: prints "ready", then one line once
# its write returned: the count or the errno name, and how long it took.
_WRITER = r'''
import errno, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
print("ready", flush=True)
if sys.argv[2:] == ["go"]:          # write once told to
    sys.stdin.readline()
t0 = time.monotonic()
try:
    n = os.write(fd, b"mem")
except OSError as e:
    n = errno.errorcode[e.errno]
print(n, round(time.monotonic() - t0, 3), flush=True)
'''

# An alarm timerfd (clock given), due in SECS, then the state write:
# prints when the write returned and when the alarm was due (boot clock).
_ALARM_THEN_SLEEP = r'''
import ctypes, os, select, sys, time
libc = ctypes.CDLL(None, use_errno=True)
class TS(ctypes.Structure): _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
class ITS(ctypes.Structure): _fields_ = [("i", TS), ("v", TS)]
state, clock, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
tfd = libc.timerfd_create(clock, 0)
assert tfd >= 0, ctypes.get_errno()
due = time.clock_gettime(time.CLOCK_BOOTTIME) + secs
assert libc.timerfd_settime(tfd, 0, ctypes.byref(ITS(TS(0, 0), TS(int(secs), int(secs % 1 * 1e9)))), None) == 0
if len(sys.argv) > 4:
    select.select([tfd], [], [])     # expired, and left unread
fd = os.open(state, os.O_WRONLY)
n = os.write(fd, b"mem")
print(n, time.clock_gettime(time.CLOCK_BOOTTIME) - due, flush=True)
'''

CLOCK_REALTIME_ALARM, CLOCK_BOOTTIME_ALARM = 8, 9


# --- cgroups ----------------------------------------------------------------------

def _mounts():
    with open("/proc/self/mountinfo") as f:
        for ln in f:
            fields = ln.split()
            sep = fields.index("-")
            yield fields[4], fields[sep + 1], fields[sep + 3].split(",")


@pytest.fixture(scope="module", params=["v2", "v1"])
def hierarchy(request):
    """(version, directory under which the test's cgroups are made)."""
    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    version = request.param
    made = None
    if version == "v2":
        made = tempfile.mkdtemp(prefix="powerfs-cgroup2-")
        r = subprocess.run(["mount", "-t", "cgroup2", "none", made],
                           capture_output=True, text=True)
        if r.returncode:
            os.rmdir(made)
            pytest.skip(f"cannot mount cgroup2: {r.stderr.strip()}")
        root = made
    else:
        root = next((point for point, fstype, opts in _mounts()
                     if fstype == "cgroup" and "freezer" in opts), None)
        if root is None:
            made = tempfile.mkdtemp(prefix="powerfs-freezer-")
            r = subprocess.run(["mount", "-t", "cgroup", "-o", "freezer",
                                "none", made], capture_output=True, text=True)
            if r.returncode:
                os.rmdir(made)
                pytest.skip(f"no v1 freezer: {r.stderr.strip()}")
            root = made
    yield version, root
    if made:
        subprocess.run(["umount", "-l", made])
        os.rmdir(made)


class Cgroup:
    """One cgroup made for a test, and the processes started in it."""

    def __init__(self, version, parent):
        self.version = version
        self.dir = os.path.join(parent,
                                f"powerfs-test-{os.getpid()}-{next(_serial)}")
        os.mkdir(self.dir)
        self.procs = []

    def file(self, name):
        return os.path.join(self.dir, name)

    def state(self):
        """THAWED, FREEZING or FROZEN, as the v1 freezer says it."""
        if self.version == "v1":
            with open(self.file("freezer.state")) as f:
                return f.read().strip()
        with open(self.file("cgroup.events")) as f:
            if "frozen 1" in f.read():
                return "FROZEN"
        with open(self.file("cgroup.freeze")) as f:
            return "FREEZING" if f.read().strip() == "1" else "THAWED"

    def wait_state(self, want, timeout=10.0):
        got = []
        ok = wait_until(lambda: got.append(self.state()) or got[-1] == want,
                        timeout=timeout, interval=0.002)
        return ok

    def popen(self, *argv, **kw):
        """argv started inside the cgroup (it joins before it execs)."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(
            ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"',
             self.dir, *map(str, argv)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, **kw)
        self.procs.append(p)
        return p

    def pids(self):
        with open(self.file("cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]

    def cpu_ns(self):
        """CPU time of every thread in the cgroup so far (schedstat)."""
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with contextlib.suppress(OSError):
                        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                            total += int(f.read().split()[0])
        return total

    def thaw(self):
        with contextlib.suppress(OSError):
            with open(self.file("freezer.state" if self.version == "v1"
                                else "cgroup.freeze"), "w") as f:
                f.write("THAWED" if self.version == "v1" else "0")

    def destroy(self):
        self.thaw()
        deadline = time.monotonic() + 10
        while self.pids() and time.monotonic() < deadline:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.communicate(timeout=5)
        with contextlib.suppress(OSError):
            os.rmdir(self.dir)


class Box:
    """A cgroup and the powerfs that puts it to sleep."""

    def __init__(self, hierarchy):
        self.version, parent = hierarchy
        self.cg = Cgroup(self.version, parent)
        self.servers = []
        self.pfs = None

    def start(self, *args, reasons=False, powerfs=Powerfs):
        extra = {"extra": ("wakeup-reasons", "class-wakeup")} if reasons \
            else {}
        cls = ExtraMounts if reasons else powerfs
        p = cls("-d", f"--backend=freeze:{self.cg.dir}", *args, **extra)
        self.pfs = p.start()
        self.servers.append(p)
        return p

    def close(self):
        kill_children()
        self.cg.destroy()
        failures = []
        for p in self.servers:
            try:
                p.stop()
            except pytest.fail.Exception as e:
                failures.append(str(e))
        return failures


@pytest.fixture
def box(hierarchy):
    b = Box(hierarchy)
    yield b
    failures = b.close()
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


def writer_in(box, path=None, go=False):
    """A writer of mem inside the cgroup, its file open; it writes at
    once, or (go) once go() is called."""
    w = box.cg.popen(PYTHON, "-c", _WRITER, path or box.pfs.path("state"),
                     *(["go"] if go else []),
                     stdin=subprocess.PIPE if go else subprocess.DEVNULL)
    assert w.stdout.readline() == "ready\n", w.stderr.read()
    if go:
        def go_on():
            w.stdin.write("go\n")
            w.stdin.flush()
        w.go = go_on
    return w


def result_of(proc, timeout=10.0):
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "still blocked"
    n, seconds = proc.stdout.readline().split()
    return (int(n) if n.isdigit() else n), float(seconds)


def host_write(pfs, name, data):
    """One open and write(2) of the mount's file: its result, or the
    OSError it raised (a close that fails after that is not its
    business: the server may be gone)."""
    fd = os.open(pfs.path(name), os.O_WRONLY)
    try:
        return os.write(fd, data)
    except OSError as e:
        return e
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def errno_of(result):
    return result.errno if isinstance(result, OSError) else result


def host_lock(pfs, name):
    assert pfs.write("wake_lock", name) == len(name)


def host_unlock(pfs, name):
    assert pfs.write("wake_unlock", name) == len(name)


def counter_value(work):
    try:
        with open(os.path.join(work, "count")) as f:
            return int(f.read() or 0)
    except (OSError, ValueError):
        return 0


def answered_by_the_freezer(log):
    return "write interrupted by the freezer of its sleep: answered now" in log


# --- the files -----------------------------------------------------------------------

def test_states_and_mem_sleep(box):
    """A container has one way to sleep: freeze and mem both freeze the
    cgroup; mem_sleep offers s2idle only, as a platform without deep
    sleep does; disk is not there."""
    p = box.start()
    assert p.read("state") == b"freeze mem\n"
    assert p.read("mem_sleep") == b"[s2idle]\n"
    with raises_errno(errno.EINVAL):
        p.write("mem_sleep", b"deep")
    assert p.write("mem_sleep", b"s2idle") == 6
    with raises_errno(errno.ENOSYS):
        p.write("state", b"disk")
    assert box.cg.state() == "THAWED"


# --- Android inside ---------------------------------------------------------------------

def stop_android(p, android, work):
    """Ask the container_sleep client, woken by the host's lock "hostwake",
    to stop (its loop waits for that lock to go, then ends); its result."""
    with open(f"{work}/stop", "w"):
        pass
    assert android.stdout.readline() == "stopping\n"
    host_unlock(p, b"hostwake")
    return json.loads(android.stdout.readline())


def kill_android(p, android):
    """Teardown of a client still running: killed with a host lock held,
    so that its container is awake when it goes."""
    if android.poll() is None:
        host_lock(p, b"teardown")
        android.kill()
        host_unlock(p, b"teardown")


def test_android_sleeps_until_its_alarm_and_a_host_wake_lock(box, tmp_path,
                                                            record_property):
    """SystemSuspend's loop puts the container to sleep as soon as nothing
    holds it awake: every task is frozen (the counter stops, the tasks'
    CPU time stays flat), and its own write of mem was answered when the
    freezer interrupted it.  Its CLOCK_BOOTTIME_ALARM timerfd, due 2 s
    after the start, wakes it within ALARM_LATE_MAX; it sleeps again, and
    a wake_lock write from the host wakes it at once.  Every write of mem
    returned 3; suspend_stats, wakeup_sources and wakeup_reasons say what
    woke it each time and how long it slept."""
    p = box.start(reasons=True)
    work = str(tmp_path)
    os.chmod(work, 0o777)
    env = dict(os.environ, CLIENT_SYS_POWER=p.mnt,
               CLIENT_WAKEUP_REASONS=p.extra["wakeup-reasons"],
               CLIENT_CLASS_WAKEUP=p.extra["class-wakeup"])
    android = box.cg.popen(PYTHON, CLIENT, "container_sleep", work, "2",
                           env=env)
    assert android.stdout.readline() == "ready\n", android.stderr.read()
    try:
        # Asleep: the counter stands still, no task uses the CPU.
        assert box.cg.wait_state("FROZEN", timeout=5), box.cg.state()
        count, cpu = counter_value(work), box.cg.cpu_ns()
        time.sleep(0.5)
        frozen_throughout = box.cg.state() == "FROZEN"
        assert frozen_throughout, "woke before the alarm"
        assert counter_value(work) == count
        assert box.cg.cpu_ns() == cpu
        assert answered_by_the_freezer(p.log()), p.log()

        # The alarm.
        assert wait_until(lambda: os.path.exists(f"{work}/alarm"),
                          timeout=10), p.log()
        with open(f"{work}/alarm") as f:
            alarm = json.load(f)
        late = alarm["fired"] - alarm["due"]
        record_property("alarm_late_s", round(late, 4))
        assert 0 <= late < ALARM_LATE_MAX, alarm
        # It counted while awake, then sleeps again, for good: no alarm.
        assert wait_until(lambda: counter_value(work) > count, timeout=5)
        assert box.cg.wait_state("FROZEN", timeout=5), box.cg.state()
        count = counter_value(work)

        # The host's wake lock.
        t0 = time.monotonic()
        host_lock(p, b"hostwake")
        assert box.cg.wait_state("THAWED", timeout=5)
        took = time.monotonic() - t0
        record_property("host_wake_s", round(took, 4))
        assert took < WAKE_MAX, took
        assert wait_until(lambda: counter_value(work) > count, timeout=5)

        res = stop_android(p, android, work)
    finally:
        kill_android(p, android)
    assert res["thread_ended"] and res["errors"] == [], res
    cycles = res["cycles"]
    assert cycles and all(c["success"] for c in cycles), cycles
    reasons = [c["reasons"] for c in cycles]
    # The first sleep ends by the alarm, the last by the host's lock;
    # between them (a wake that registered an event and found the timer
    # read) nothing else may wake it.
    assert reasons[0] == ["-1 alarmtimer"], reasons
    assert reasons[-1] == ["-1 hostwake"], reasons
    assert len(cycles) == 2, reasons
    assert abs(cycles[0]["slept"] - 1.9) < 0.3, cycles[0]
    stats = res["suspend_stats"]
    assert (stats["success"], stats["fail"]) == (2, 0), stats
    sources = p.sources()
    assert sources[b"alarmtimer"].event_count == 1
    # SystemSuspend had armed the handshake: the alarm counts as a wakeup.
    assert sources[b"alarmtimer"].wakeup_count == 1
    assert sources[b"hostwake"].wakeup_count == 1


# --- writers and readers --------------------------------------------------------------------

def test_a_writer_on_the_host_is_answered_at_the_wake(box):
    """The host (outside the cgroup) asks for the container's sleep: it
    gets no interrupt, and waits until the container wakes (a wake_lock
    write), as a writer of the kernel's state does."""
    p = box.start()
    counting = box.cg.popen("sh", "-c", "while :; do :; done")
    w = conftest.Background(p.write, "state", b"mem")
    assert box.cg.wait_state("FROZEN", timeout=5)
    assert w.blocked if hasattr(w, "blocked") else not w.finished.is_set()
    time.sleep(0.3)
    assert not w.finished.is_set(), "the host's write returned during the sleep"
    host_lock(p, b"w")
    assert w.wait(5) == 3
    assert box.cg.state() == "THAWED"
    host_unlock(p, b"w")
    assert not answered_by_the_freezer(p.log())
    assert p.read("suspend_stats/success") == b"1\n"
    counting.kill()


def test_a_reader_in_the_container_gets_eintr_and_reads_again(box):
    """A task of the container blocked in a wakeup_count read (a lock
    held) gets EINTR when its container sleeps, as the kernel's freezer
    gives it, and nothing more until it is thawed."""
    p = box.start()
    host_lock(p, b"held")
    reader = box.cg.popen(PYTHON, "-c", conftest._READER,
                          p.path("wakeup_count"), "default", "-1", "0", "read")
    assert reader.stdout.readline() == "ready\n"
    conftest.wait_in_syscall(reader, conftest._CALL_SYSCALLS["read"], "read")
    # A direct state write does not wait for wake locks (the kernel's
    # rule): the sleep goes ahead.
    w = conftest.Background(p.write, "state", b"mem")
    assert box.cg.wait_state("FROZEN", timeout=5)
    ready, _, _ = select.select([reader.stdout], [], [], 0.3)
    assert not ready, "the reader ran while frozen"
    # Letting go of a lock is no wakeup event; taking one is.
    host_unlock(p, b"held")
    time.sleep(0.2)
    assert box.cg.state() == "FROZEN"
    host_lock(p, b"wake")
    assert w.wait(5) == 3
    host_unlock(p, b"wake")
    out = json.loads(reader.stdout.readline())
    assert out["errno"] == errno.EINTR and out["n"] == -1, out


def test_a_freeze_that_does_not_complete_fails_with_ebusy(box, mount):
    """A task the freezer cannot take (here: one inside another FUSE
    file system's request that is never answered, a second powerfs
    sleeping for 60 s) keeps the freeze from completing: after
    pm_freeze_timeout the attempt fails with EBUSY at "freeze", as the
    kernel's does, and the cgroup is thawed.  The log names the task."""
    p = box.start()
    other = mount("--simulate-sleep-ms=60000")
    blocker = box.cg.popen(PYTHON, "-c", _WRITER, other.path("state"))
    assert blocker.stdout.readline() == "ready\n"
    conftest.wait_in_syscall(blocker, {"x86_64": ("1",), "aarch64": ("64",)},
                             "write")
    assert p.write("pm_freeze_timeout", b"500") == 3
    t0 = time.monotonic()
    with raises_errno(errno.EBUSY):
        p.write("state", b"mem")
    took = time.monotonic() - t0
    assert 0.45 < took < 5, took
    assert box.cg.wait_state("THAWED", timeout=2)
    assert [p.read("suspend_stats/" + n) for n in
            ("fail", "failed_freeze", "last_failed_errno",
             "last_failed_step")] == [b"1\n", b"1\n", b"-16\n", b"freeze\n"]
    log = p.log()
    assert "not frozen within pm_freeze_timeout (500 ms): python3 (" \
        in log.replace("python3.11", "python3"), log
    # The other powerfs is done with it.
    other.write("wake_lock", b"x")
    assert result_of(blocker)[0] == 3
    assert blocker.wait(5) == 0
    other.write("wake_unlock", b"x")


def test_an_event_after_the_handshake_fails_the_sleep_before_any_freeze(box):
    p = box.start()
    count = p.count()
    assert p.write("wakeup_count", str(count)) == len(str(count))
    host_lock(p, b"late")
    host_unlock(p, b"late")
    with raises_errno(errno.EBUSY):
        p.write("state", b"mem")
    assert "through freeze" not in p.log()
    assert box.cg.state() == "THAWED"
    assert p.read("suspend_stats/failed_freeze") == b"1\n"


# --- alarms ---------------------------------------------------------------------------------

@pytest.mark.parametrize("clock", [CLOCK_BOOTTIME_ALARM, CLOCK_REALTIME_ALARM])
def test_an_alarm_of_either_clock_wakes_it(box, clock):
    p = box.start()
    a = box.cg.popen(PYTHON, "-c", _ALARM_THEN_SLEEP, p.path("state"), clock,
                     "1.5")
    n, late = a.stdout.readline().split()
    assert n == "3"
    assert 0 <= float(late) < ALARM_LATE_MAX, late
    assert answered_by_the_freezer(p.log())
    assert "the earliest of 1 alarms due in" in p.log()
    assert p.sources()[b"alarmtimer"].event_count == 1


def test_an_alarm_that_expired_unread_is_due_now(box):
    """An alarm that fired and was not read is due now: the sleep ends as
    soon as the freeze is complete, and alarmtimer stays active a while (as
    the kernel's does for an alarm too close to sleep through), time for
    its owner to read it."""
    p = box.start()
    a = box.cg.popen(PYTHON, "-c", _ALARM_THEN_SLEEP, p.path("state"),
                     CLOCK_BOOTTIME_ALARM, "0.1", "unread")
    n, late = a.stdout.readline().split()
    assert n == "3" and float(late) < 1.0, late
    assert "expired unread: due now" in p.log()
    assert p.active() == []
    # Active: its times count in whole milliseconds, so a read in the
    # millisecond it became active shows 0; it stays active for 2 s.
    assert wait_until(lambda: p.sources()[b"alarmtimer"].active_since > 0,
                      timeout=1.5), p.sources()[b"alarmtimer"]
    assert p.sources()[b"alarmtimer"].active_count == 1


# --- the host and logind ----------------------------------------------------------------------

def test_no_logind_no_inhibit_sleep(box, tmp_path, monkeypatch):
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS",
                       f"unix:path={tmp_path}/no-bus")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([POWERFS, "-f", f"--backend=freeze:{box.cg.dir}",
                        "--inhibit-sleep", str(mnt)], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 1, r
    assert "--inhibit-sleep:" in r.stderr, r.stderr
    assert not os.path.ismount(mnt)


# --- options ----------------------------------------------------------------------------------

def start_fails(tmp_path, backend):
    mnt = tmp_path / "mnt"
    mnt.mkdir(exist_ok=True)
    r = subprocess.run([POWERFS, "-f", f"--backend={backend}", str(mnt)],
                       capture_output=True, text=True, timeout=20)
    assert not os.path.ismount(mnt)
    return r


def test_a_path_that_is_no_cgroup_is_refused(box, tmp_path):
    r = start_fails(tmp_path, f"freeze:{tmp_path}")
    assert r.returncode == 2, r
    assert r.stderr == (f"powerfs: --backend=freeze: {tmp_path} is neither "
                        "in a cgroup v2 hierarchy nor in the v1 freezer's\n")
    parent = os.path.dirname(box.cg.dir)
    r = start_fails(tmp_path, f"freeze:{parent}")
    assert r.returncode == 2, r
    assert "is no cgroup that can be frozen" in r.stderr, r.stderr


def test_powerfs_inside_the_cgroup_is_refused(box, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = box.cg.popen(POWERFS, "-f", f"--backend=freeze:{box.cg.dir}", mnt)
    _, err = r.communicate(timeout=20)
    assert r.returncode == 2
    assert "powerfs runs inside" in err and "it would freeze itself" in err


def test_a_cgroup_that_comes_later(box):
    """The container's cgroup may not exist yet when powerfs starts (LXC
    makes it when the container starts): a sleep before then fails, one
    after works."""
    later = os.path.join(box.cg.dir, "later")
    p = Powerfs("-d", f"--backend=freeze:{later}").start()
    box.servers.append(p)
    assert "not there yet" in p.log()
    with raises_errno(errno.EIO):
        p.write("state", b"mem")
    assert p.read("suspend_stats/last_failed_step") == b"freeze\n"
    os.mkdir(later)
    try:
        w = conftest.Background(p.write, "state", b"mem")
        assert wait_until(lambda: "asleep (0 tasks" in p.log(), timeout=5)
        host_lock(p, b"x")
        assert w.wait(5) == 3
        host_unlock(p, b"x")
    finally:
        os.rmdir(later)


# --- crashes, stops, the keeper ---------------------------------------------------------------

def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


WRITE_SYSCALL = {"x86_64": ("1",), "aarch64": ("64",)}


def stop_and_wait(pid):
    """SIGSTOP, and wait until every thread of pid has stopped (a thread
    that is woken by a request at that moment could still read it)."""
    os.kill(pid, signal.SIGSTOP)

    def stopped():
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "T":
                    return False
        return True
    assert wait_until(stopped, timeout=5)


def left_asleep_thawed(log):
    return "left asleep by a server that ended: thawed" in log


@pytest.mark.parametrize("point", ["before the freeze", "during the freeze",
                                   "while asleep", "at the wake-up"])
def test_kill_9_of_the_server_leaves_no_frozen_container(box, mount, point,
                                                         record_property):
    """kill -9 of the server at each point of a sleep the container asked
    for (the keeper starts the next server at once):
    - before the freeze (the server stopped before it read the write): the
      next server reads it, and the container sleeps as asked;
    - during the freeze (a task the freezer cannot take holds it up): the
      next server thaws the cgroup; the writer had its answer (3);
    - while asleep: the same;
    - at the wake-up (the server stopped as a host wake_lock came, before
      it could thaw): the next server thaws, and takes the lock.
    In every case the writer's write returns 3 and no task stays frozen."""
    p = box.start()
    blocker = None
    if point == "during the freeze":
        other = mount("--simulate-sleep-ms=60000")
        blocker = box.cg.popen(PYTHON, "-c", _WRITER, other.path("state"))
        assert blocker.stdout.readline() == "ready\n"
        conftest.wait_in_syscall(blocker, WRITE_SYSCALL, "write")
    server = p.server_pid()
    w = writer_in(box, go=True)
    if point == "before the freeze":
        stop_and_wait(server)
    w.go()
    if point == "before the freeze":
        conftest.wait_in_syscall(w, WRITE_SYSCALL, "write", queued_only=True)
        assert box.cg.state() == "THAWED"
    elif point == "during the freeze":
        assert wait_until(lambda: answered_by_the_freezer(p.log()))
        time.sleep(0.2)
        assert box.cg.state() == "FREEZING"
    else:
        assert box.cg.wait_state("FROZEN", timeout=5)
    lock = None
    if point == "at the wake-up":
        stop_and_wait(server)
        lock = conftest.Background(p.write, "wake_lock", b"wake")
        time.sleep(0.2)
    os.kill(server, signal.SIGKILL)
    assert wait_until(lambda: gone(server), timeout=5)
    if point == "before the freeze":
        assert box.cg.wait_state("FROZEN", timeout=10), p.log()
        host_lock(p, b"wake")
    else:
        assert box.cg.wait_state("THAWED", timeout=10), p.log()
        assert wait_until(lambda: left_asleep_thawed(p.log())), p.log()
    assert result_of(w)[0] == 3
    if lock:
        assert lock.wait(5) == 4
    if point != "during the freeze":
        assert box.cg.state() == "THAWED"
    if p.active():
        host_unlock(p, b"wake")
    if blocker:
        other.write("wake_lock", b"x")
        assert result_of(blocker)[0] == 3
        assert blocker.wait(5) == 0
        other.write("wake_unlock", b"x")
    record_property("log", "\n".join(line for line in p.log().splitlines()
                                     if "WARNING" in line))


@pytest.mark.parametrize("path", ["resend", "replay"])
def test_a_host_writer_whose_server_dies_during_the_sleep_gets_ebusy(
        box, monkeypatch, path):
    """A writer outside the cgroup waits for the wake-up inside its
    request; its server killed, the next one thaws the container and
    answers the write (sent again by the kernel, or before Linux 6.9
    processed again from its copy) with EBUSY: state is never run twice."""
    if path == "replay":
        monkeypatch.setenv("POWERFS_NO_RESEND", "1")
    p = box.start()
    w = conftest.Background(host_write, p, "state", b"mem")
    assert box.cg.wait_state("FROZEN", timeout=5)
    assert wait_until(lambda: ": asleep (" in p.log())
    server = p.server_pid()
    os.kill(server, signal.SIGKILL)
    assert errno_of(w.wait(10)) == errno.EBUSY
    assert box.cg.wait_state("THAWED", timeout=5)
    log = p.log()
    assert wait_until(lambda: left_asleep_thawed(p.log())), log
    log = p.log()
    assert "a write of state that the previous server had taken" in log
    if path == "replay":
        assert re.search(r"left \d+ requests? unanswered", log), log


def test_sigterm_during_a_sleep_thaws_the_container(box):
    """SIGTERM while asleep: the server ends the attempt (a writer on the
    host gets EIO), thaws the container, and exits 0."""
    p = box.start()
    w = conftest.Background(host_write, p, "state", b"mem")
    assert box.cg.wait_state("FROZEN", timeout=5)
    assert wait_until(lambda: ": asleep (" in p.log())
    p.proc.send_signal(signal.SIGTERM)
    assert errno_of(w.wait(10)) == errno.EIO
    # Thawed by the time it has exited (it answers its waiting requests
    # first, then releases the backend).
    assert p.proc.wait(10) == 0
    assert box.cg.state() == "THAWED"
    box.servers.remove(p)
    _live.discard(p)
    p.force_cleanup()
    assert not os.path.ismount(p.mnt)


def test_an_aborted_connection_during_a_sleep_thaws_the_container(box,
                                                                  tmp_path):
    """The connection aborted while asleep (the mount is dead: nothing can
    reach powerfs any more): the server ends, and thaws the container."""
    p = box.start()
    w = writer_in(box)
    assert box.cg.wait_state("FROZEN", timeout=5)
    ctl = tmp_path / "fusectl"
    ctl.mkdir()
    subprocess.run(["mount", "-t", "fusectl", "none", str(ctl)], check=True)
    try:
        with open(ctl / str(os.minor(os.stat(p.mnt).st_dev)) / "abort",
                  "w") as f:
            f.write("1")
        assert p.proc.wait(10) == 1
        assert box.cg.state() == "THAWED"
        assert result_of(w)[0] == 3
    finally:
        subprocess.run(["umount", str(ctl)])
        box.servers.remove(p)
        _live.discard(p)
        p.force_cleanup()


def test_autosleep_sleeps_it_and_an_unmount_thaws_it(box):
    """autosleep puts the container to sleep whenever no wake lock is held
    (no writer waits then); a host lock wakes it and keeps it awake; its
    release lets it sleep again.  Unmounted while it sleeps (nobody is in
    a request), powerfs ends, and thaws it on its way out."""
    p = box.start()
    box.cg.popen("sh", "-c", "while :; do :; done")
    assert p.write("autosleep", b"mem") == 3
    assert box.cg.wait_state("FROZEN", timeout=5)
    host_lock(p, b"hold")
    assert box.cg.wait_state("THAWED", timeout=5)
    assert not wait_until(lambda: box.cg.state() != "THAWED", timeout=0.6)
    host_unlock(p, b"hold")
    assert box.cg.wait_state("FROZEN", timeout=5)
    assert int(p.read("suspend_stats/success")) >= 1
    r = subprocess.run([conftest.FUSERMOUNT, "-u", p.mnt],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert p.proc.wait(10) == 0
    assert box.cg.state() == "THAWED"
    box.servers.remove(p)
    _live.discard(p)
    p.force_cleanup()


def test_a_keeper_that_gives_up_thaws_the_container(box):
    """A server that crashes again and again while its container sleeps
    (here SIGSEGV from outside, five times within 10 s): the keeper gives
    up, and its last act thaws the container the last server froze."""
    p = box.start()
    loop = box.cg.popen("sh", "-c", f'while echo mem > "{p.path("state")}"; '
                        "do :; done")
    server = None
    try:
        for i in range(5):
            found = []
            assert wait_until(lambda: found.extend(
                c for c in children(p.proc.pid)
                if c != server and not gone(c)) or found, timeout=10), \
                (i, p.log())
            server = found[0]
            # Asleep again, frozen by this server.
            assert wait_until(lambda: p.log().count(": asleep (") > i,
                              timeout=10), (i, p.log())
            assert box.cg.state() == "FROZEN", (i, box.cg.state())
            os.kill(server, signal.SIGSEGV)
            assert wait_until(lambda: gone(server), timeout=10)
        assert p.proc.wait(10) == 1
        assert box.cg.wait_state("THAWED", timeout=5), box.cg.state()
        assert "thawed, as no server will come back" in p.log(), p.log()
    finally:
        # Its writes now land in the bare mount point: stop it.
        loop.kill()
        box.servers.remove(p)
        _live.discard(p)
        p.force_cleanup()


def test_pm_test_levels_stop_before_anything_is_frozen(box):
    p = box.start()
    assert p.write("pm_test", b"freezer") == 7
    w = writer_in(box)
    assert result_of(w)[0] == 3
    assert "through freeze" not in p.log()
    assert p.read("suspend_stats/success") == b"1\n"


# --- logind ---------------------------------------------------------------------------------

def host_power_dir(tmp_path):
    """A host /sys/power whose pm_wakeup_irq says IRQ 8 (rtc0) woke it."""
    d = tmp_path / "host" / "power"
    (d / "suspend_stats").mkdir(parents=True)
    (d / "pm_wakeup_irq").write_text("8\n")
    irq = tmp_path / "host" / "kernel" / "irq" / "8"
    irq.mkdir(parents=True)
    (irq / "actions").write_text("rtc0\n")
    return d


def test_the_hosts_resume_wakes_a_sleeping_container(logind_factory, box,
                                                     tmp_path):
    """logind's PrepareForSleep(false) after the host's own sleep wakes the
    container, and wakeup_reasons names the IRQ that woke the host.  The
    host's sleep while the container is awake counts as a sleep too."""
    logind = logind_factory()
    p = box.start(f"--host-power={host_power_dir(tmp_path)}", reasons=True)
    assert "the host's sleeps are not followed" not in p.log()
    w = writer_in(box)
    assert box.cg.wait_state("FROZEN", timeout=5)
    logind.prepare_for_sleep(True)
    time.sleep(0.3)
    assert box.cg.state() == "FROZEN"
    logind.prepare_for_sleep(False)
    assert box.cg.wait_state("THAWED", timeout=5)
    assert result_of(w)[0] == 3
    reasons = p.extra["wakeup-reasons"]
    with open(f"{reasons}/last_resume_reason") as f:
        assert f.read() == "8 rtc0\n"
    assert p.read("suspend_stats/success") == b"1\n"
    logind.prepare_for_sleep(True)
    logind.prepare_for_sleep(False)
    assert wait_until(lambda: p.read("suspend_stats/success") == b"2\n")


def test_inhibit_sleep_holds_the_host_while_a_lock_is_held(logind, box):
    p = box.start("--inhibit-sleep")
    host_lock(p, b"keep")
    assert wait_until(lambda: logind.blocks(), timeout=5)
    assert logind.blocks()[0][2] == "powerfs: held by keep"
    host_unlock(p, b"keep")
    assert wait_until(lambda: not logind.blocks(), timeout=5)


# --- the bench ----------------------------------------------------------------------------

@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
def test_bench_freeze_runs(v1):
    """scripts/bench-freeze prints its figures (not asserted: timed
    figures would fail on a busy machine) and leaves nothing behind."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    before = open("/proc/self/mountinfo").read().count("bench-")
    r = subprocess.run([str(conftest.REPO / "scripts" / "bench-freeze"),
                        f"--powerfs={POWERFS}", "--rounds=2", "--asleep=1",
                        "--alarm-ms=200", *(["--v1"] if v1 else [])],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert re.search(r"\nalarm to running again: 2 sleeps, median [0-9.]+ "
                     r"ms, max [0-9.]+ ms\n", out), out
    m = re.search(r"\na sleeping container over 1\.0 s: ([0-9.]+) ms of CPU, "
                  r"its counter (\d+) -> (\d+); powerfs's server meanwhile "
                  r"[0-9.]+ ms, \d+ wake-ups\n", out)
    assert m, out
    assert float(m[1]) == 0 and m[2] == m[3], out
    assert open("/proc/self/mountinfo").read().count("bench-") == before
