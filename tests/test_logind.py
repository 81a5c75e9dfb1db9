"""--backend=logind against python-dbusmock's logind template.

Each test gets a private system bus (dbus-daemon) with a fresh mock of
org.freedesktop.login1; powerfs reaches it through DBUS_SYSTEM_BUS_ADDRESS.
The mock's Suspend/Hibernate only log the call: the tests play the host's
sleep and resume by emitting PrepareForSleep themselves.  Nothing here can
suspend the machine.
"""

import ctypes
import errno
import json
import os
import subprocess
import tempfile
import time

import dbus
import pytest

import conftest
from conftest import Background, Reader, raises_errno, wait_until

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC
 "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:tmpdir=/tmp</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""

MOCK_IFACE = "org.freedesktop.DBus.Mock"
MANAGER = "org.freedesktop.login1.Manager"


class Logind:
    """A private system bus with dbusmock's logind on it."""

    def __init__(self, tmpdir, params=None):
        self.tmpdir = tmpdir
        self.params = params
        conf = os.path.join(tmpdir, "bus.conf")
        with open(conf, "w") as f:
            f.write(BUS_CONFIG)
        out = subprocess.run(
            ["dbus-daemon", "--fork", "--print-address=1", "--print-pid=1",
             f"--config-file={conf}"], capture_output=True, check=True,
            text=True).stdout.split()
        self.address, self.bus_pid = out[0], int(out[1])
        self.mock = None
        self.conn = dbus.bus.BusConnection(self.address)

    def start_mock(self, template="logind"):
        args = ["/usr/bin/python3", "-m", "dbusmock", "--system",
                "--template", template]
        if self.params:
            args += ["-p", json.dumps(self.params)]
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address)
        self.mock = subprocess.Popen(args, env=env,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        assert wait_until(lambda: self.conn.name_has_owner(
            "org.freedesktop.login1"), 10), "dbusmock did not start"
        self.obj = self.conn.get_object("org.freedesktop.login1",
                                        "/org/freedesktop/login1")

    def stop_mock(self):
        if self.mock and self.mock.poll() is None:
            self.mock.terminate()
            self.mock.wait(10)
        self.mock = None

    def close(self):
        self.stop_mock()
        try:
            os.kill(self.bus_pid, 15)
        except ProcessLookupError:
            pass

    # --- playing logind ---------------------------------------------------

    def calls(self, method):
        return [list(args) for _, name, args in
                self.obj.GetCalls(dbus_interface=MOCK_IFACE)
                if name == method]

    def prepare_for_sleep(self, start):
        self.obj.EmitSignal(MANAGER, "PrepareForSleep", "b",
                            [dbus.Boolean(start)], dbus_interface=MOCK_IFACE)

    def inhibitors(self):
        return [tuple(str(x) for x in i[:4]) for i in
                self.obj.ListInhibitors(dbus_interface=MANAGER)]

    def powerfs_inhibitors(self):
        return [i for i in self.inhibitors() if i[1] == "powerfs"]

    def fail_method(self, method, error_name, message, in_sig="b"):
        self.obj.AddMethod(
            MANAGER, method, in_sig, "",
            f"raise dbus.exceptions.DBusException({message!r}, "
            f"name={error_name!r})", dbus_interface=MOCK_IFACE)

    def add_method(self, method, in_sig, out_sig="", code=""):
        self.obj.AddMethod(MANAGER, method, in_sig, out_sig, code,
                           dbus_interface=MOCK_IFACE)

    def blocks(self):
        return [i for i in self.powerfs_inhibitors() if i[3] == "block"]

    def inhibit_calls(self, mode):
        return [c for c in self.calls("Inhibit") if c[3] == mode]


@pytest.fixture
def logind_factory(monkeypatch):
    made = []

    def factory(params=None, start=True):
        li = Logind(tempfile.mkdtemp(prefix="powerfs-bus-"), params)
        made.append(li)
        monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", li.address)
        if start:
            li.start_mock()
        return li
    yield factory
    for li in made:
        li.close()


@pytest.fixture
def logind(logind_factory):
    return logind_factory()


def write_state(pfs, data):
    return pfs.write("state", data)


def stat(pfs, name):
    return pfs.read("suspend_stats/" + name)


def test_states_follow_can_suspend_and_can_hibernate(logind_factory, mount):
    logind_factory({"CanSuspend": "yes", "CanHibernate": "no"})
    assert mount("--backend=logind").read("state") == b"freeze mem\n"


def test_challenge_counts_as_possible(logind_factory, mount):
    logind_factory({"CanSuspend": "challenge", "CanHibernate": "challenge"})
    assert mount("--backend=logind").read("state") == b"freeze mem disk\n"


def test_nothing_possible(logind_factory, mount):
    logind_factory({"CanSuspend": "no", "CanHibernate": "no"})
    pfs = mount("--backend=logind")
    assert pfs.read("state") == b""
    with raises_errno(errno.EINVAL):
        write_state(pfs, b"mem")


def test_mem_calls_suspend_and_returns_after_sleep_begins(logind, mount):
    pfs = mount("--backend=logind")
    w = Background(write_state, pfs, b"mem")
    assert wait_until(lambda: logind.calls("Suspend"), 5)
    assert logind.calls("Suspend") == [[False]]
    time.sleep(0.2)     # not answered in a window of 0.2 s
    assert not w.finished.is_set(), "state write returned before the sleep"
    logind.prepare_for_sleep(True)
    # Answered as soon as the host is about to sleep: no client may stay
    # inside a request while the host freezes its tasks.
    assert w.wait(5) == 3
    logind.prepare_for_sleep(False)
    assert wait_until(lambda: stat(pfs, "success") == b"1\n")
    assert stat(pfs, "fail") == b"0\n"


def test_disk_calls_hibernate(logind, mount):
    pfs = mount("--backend=logind")
    w = Background(write_state, pfs, b"disk\n")
    assert wait_until(lambda: logind.calls("Hibernate"), 5)
    assert logind.calls("Hibernate") == [[False]]
    assert logind.calls("Suspend") == []
    logind.prepare_for_sleep(True)
    logind.prepare_for_sleep(False)
    assert w.wait(5) == 5


def test_sleep_that_never_begins_fails_with_ebusy(logind, mount):
    pfs = mount("--backend=logind", "--suspend-timeout=1")
    t0 = time.monotonic()
    with raises_errno(errno.EBUSY):
        write_state(pfs, b"mem")
    assert 0.9 < time.monotonic() - t0 < 3
    assert stat(pfs, "fail") == b"1\n"
    assert stat(pfs, "failed_suspend") == b"1\n"
    assert stat(pfs, "last_failed_errno") == b"-16\n"
    assert stat(pfs, "last_failed_step") == b"suspend\n"
    assert "did not start the sleep" in pfs.log()


@pytest.mark.parametrize("name,code", [
    ("org.freedesktop.DBus.Error.AccessDenied", errno.EPERM),
    ("org.freedesktop.login1.SleepVerbNotSupported", errno.EINVAL),
    ("org.freedesktop.DBus.Error.Failed", errno.EIO),
])
def test_dbus_error_maps_to_errno(logind, mount, name, code):
    logind.fail_method("Suspend", name, "refused by the test")
    pfs = mount("--backend=logind")
    with raises_errno(code):
        write_state(pfs, b"mem")
    assert stat(pfs, "fail") == b"1\n"
    assert stat(pfs, "last_failed_errno") == f"{-code}\n".encode()
    log = pfs.log()
    assert name in log and "refused by the test" in log


def test_delay_inhibitor_released_for_sleep_and_taken_again(logind, mount):
    mount("--backend=logind")
    assert wait_until(lambda: logind.powerfs_inhibitors())
    (what, who, why, mode), = logind.powerfs_inhibitors()
    assert (what, who, mode) == ("sleep", "powerfs", "delay")
    logind.prepare_for_sleep(True)
    assert wait_until(lambda: not logind.powerfs_inhibitors())
    logind.prepare_for_sleep(False)
    assert wait_until(lambda: logind.powerfs_inhibitors())


def test_foreign_sleep_releases_blocked_reader_and_counts(logind, mount):
    pfs = mount("--backend=logind")
    pfs.lock("held")
    with Reader(pfs.path("wakeup_count")) as r:
        r.wait_in_read()
        assert r.blocked()
        logind.prepare_for_sleep(True)   # systemctl suspend, a lid switch...
        n, err, _ = r.result(5)
    assert (n, err) == (-1, errno.EINTR)
    logind.prepare_for_sleep(False)
    assert wait_until(lambda: stat(pfs, "success") == b"1\n")
    assert logind.calls("Suspend") == []
    pfs.unlock("held")


def test_inhibit_sleep_holds_block_inhibitor_while_locked(logind, mount):
    pfs = mount("--backend=logind", "--inhibit-sleep")

    def blocks():
        return [i for i in logind.powerfs_inhibitors() if i[3] == "block"]
    assert wait_until(lambda: logind.powerfs_inhibitors())
    assert blocks() == []
    pfs.lock("radio")
    pfs.lock("audio")
    assert wait_until(blocks)
    assert blocks() == [("sleep", "powerfs", "powerfs: held by audio",
                         "block")] or \
        blocks() == [("sleep", "powerfs", "powerfs: held by radio", "block")]
    pfs.unlock("radio")
    time.sleep(0.2)     # still one inhibitor after a window of 0.2 s
    assert len(blocks()) == 1
    pfs.unlock("audio")
    assert wait_until(lambda: not blocks())


def test_inhibit_sleep_needs_logind(tmp_path):
    r = subprocess.run([conftest.POWERFS, "--inhibit-sleep", str(tmp_path)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--inhibit-sleep" in r.stderr and len(r.stderr.splitlines()) == 1


def test_unreachable_logind_is_a_clear_error(logind_factory, tmp_path):
    logind_factory(start=False)
    r = subprocess.run([conftest.POWERFS, "-f", "--backend=logind",
                        str(tmp_path)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1
    assert "logind is not reachable" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not os.path.ismount(tmp_path)


def test_logind_leaving_and_returning(logind, mount):
    pfs = mount("--backend=logind")
    logind.stop_mock()
    assert wait_until(lambda: "logind left the bus" in pfs.log())
    with raises_errno(errno.EIO):
        write_state(pfs, b"mem")
    logind.start_mock()
    assert wait_until(lambda: "logind is back" in pfs.log())
    assert wait_until(lambda: logind.powerfs_inhibitors())
    w = Background(write_state, pfs, b"mem")
    assert wait_until(lambda: logind.calls("Suspend"), 5)
    logind.prepare_for_sleep(True)
    logind.prepare_for_sleep(False)
    assert w.wait(5) == 3


def test_queued_write_gets_eintr_when_the_sleep_begins(logind, mount):
    """The state write whose sleep begins is answered then; a wakeup_count
    write queued behind it gets EINTR, as the kernel's freezer gives a
    writer waiting for its lock."""
    pfs = mount("--backend=logind")
    w = Background(write_state, pfs, b"mem")
    assert wait_until(lambda: logind.calls("Suspend"), 5)
    stale = Background(libc_write, pfs.path("wakeup_count"), b"12345")
    # Queued on the transition lock in powerfs before the sleep begins.
    conftest.wait_in_syscall(stale.tid, {"x86_64": ("1",), "aarch64": ("64",)},
                             "write", server=pfs)
    assert not stale.finished.is_set()
    logind.prepare_for_sleep(True)
    assert w.wait(5) == 3
    assert stale.wait(5) == (-1, errno.EINTR)
    logind.prepare_for_sleep(False)


def test_nobody_waits_until_the_host_resumed(logind, mount):
    """Between PrepareForSleep(true) and (false) a reader that comes back
    (GNU cat, Python's os.read retry after EINTR) gets the count at once,
    though a lock is held: a task inside a FUSE request cannot be frozen,
    and EINTR again would have it retry in a loop.  Writing that count
    back fails as the kernel's does while an event is in progress.  After
    the resume readers block again."""
    pfs = mount("--backend=logind")
    count = pfs.read("wakeup_count")
    pfs.lock("held")
    logind.prepare_for_sleep(True)
    try:
        with Reader(pfs.path("wakeup_count")) as r:
            assert r.result(2) == (len(count), 0, count)
        assert libc_write(pfs.path("wakeup_count"),
                          count.strip()) == (-1, errno.EINVAL)
        assert libc_write(pfs.path("autosleep"), b"mem") == (3, 0)
    finally:
        logind.prepare_for_sleep(False)
    assert wait_until(lambda: pfs.read("autosleep") == b"mem\n")
    assert pfs.write("autosleep", b"off") == 3
    with Reader(pfs.path("wakeup_count")) as r:
        r.wait_in_read()
        assert r.blocked(0.3)
        pfs.unlock("held")
        n, err, _ = r.result(5)
        assert (n, err) == (2, 0)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
_libc.write.restype = ctypes.c_ssize_t


def libc_write(path, data):
    """One write(2) through libc: (result, errno); EINTR is not retried as
    Python's os.write would."""
    fd = os.open(path, os.O_WRONLY)
    try:
        n = _libc.write(fd, data, len(data))
        return n, ctypes.get_errno() if n < 0 else 0
    finally:
        os.close(fd)


def test_inhibit_sleep_refused_with_sysfs(tmp_path):
    (tmp_path / "state").write_text("mem\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([conftest.POWERFS, "-f", "--inhibit-sleep",
                        f"--backend=sysfs:{tmp_path}", str(mnt)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--inhibit-sleep needs --backend=logind" in r.stderr


# --- a slow logind never stalls the file system ----------------------------

# Python for a mock method: mark the call's start and end in files the test
# watches, and stay away for `seconds` in between (dbusmock answers nothing
# else meanwhile, like a logind stuck on polkit).
SLOW_CODE = ("open({entered!r}, 'w').close(); time.sleep({seconds}); "
             "open({left!r}, 'w').close(); {answer}")
SLOW_SECONDS = 3
MAX_LATENCY = 0.5   # seconds; on a stalled main loop it is SLOW_SECONDS


def slow_code(tmpdir, answer):
    entered = os.path.join(tmpdir, "entered")
    left = os.path.join(tmpdir, "left")
    code = SLOW_CODE.format(entered=entered, left=left,
                            seconds=SLOW_SECONDS, answer=answer)
    return code, entered, left


def worst_write_latency(pfs, entered, left):
    """Lock and unlock without pause while the mock sits in its slow
    method; returns the worst write latency and the number of pairs."""
    assert wait_until(lambda: os.path.exists(entered), 10)
    worst, pairs = 0.0, 0
    deadline = time.monotonic() + 4 * SLOW_SECONDS
    while not os.path.exists(left) and time.monotonic() < deadline:
        for name in ("wake_lock", "wake_unlock"):
            t0 = time.monotonic()
            assert pfs.write(name, b"busy") == 4
            worst = max(worst, time.monotonic() - t0)
        pairs += 1
    assert os.path.exists(left)
    print(f"worst write latency {worst * 1000:.1f} ms over {pairs} pairs")
    return worst, pairs


def test_slow_inhibit_does_not_stall_requests(logind, mount):
    pfs = mount("--backend=logind")
    assert wait_until(lambda: logind.powerfs_inhibitors())
    code, entered, left = slow_code(
        logind.tmpdir, "ret = os.open('/dev/null', os.O_RDONLY)")
    logind.add_method("Inhibit", "ssss", "h", code)
    # After resume powerfs takes its delay inhibitor again.
    logind.prepare_for_sleep(True)
    logind.prepare_for_sleep(False)
    worst, pairs = worst_write_latency(pfs, entered, left)
    assert worst < MAX_LATENCY and pairs > 10


SLOW_TEMPLATE = """
import time
from dbusmock.templates.logind import *  # noqa: F401,F403
from dbusmock.templates import logind as _logind


def load(mock, parameters):
    _logind.load(mock, parameters)
    mock.AddMethod(MAIN_IFACE, "CanSuspend", "", "s", {code!r})
"""


def test_slow_can_suspend_on_return_does_not_stall_requests(logind, mount):
    pfs = mount("--backend=logind")
    logind.stop_mock()
    assert wait_until(lambda: "logind left the bus" in pfs.log())
    code, entered, left = slow_code(logind.tmpdir, "ret = 'no'")
    template = os.path.join(logind.tmpdir, "slow_logind.py")
    with open(template, "w") as f:
        f.write(SLOW_TEMPLATE.format(code=code))
    logind.start_mock(template)
    worst, pairs = worst_write_latency(pfs, entered, left)
    assert worst < MAX_LATENCY and pairs > 10
    assert wait_until(lambda: "logind is back" in pfs.log())
    assert pfs.read("state") == b"disk\n"


# --- SuspendWithFlags: other users' block inhibitors count -----------------

@pytest.mark.parametrize("state,verb", [(b"mem", "Suspend"),
                                        (b"disk", "Hibernate")])
def test_sleep_checks_inhibitors_with_flags(logind, mount, state, verb):
    logind.add_method(verb + "WithFlags", "t")
    pfs = mount("--backend=logind")
    w = Background(write_state, pfs, state)
    assert wait_until(lambda: logind.calls(verb + "WithFlags"), 5)
    # SD_LOGIND_ROOT_CHECK_INHIBITORS, and no plain call besides.
    assert logind.calls(verb + "WithFlags") == [[1]]
    assert logind.calls(verb) == []
    logind.prepare_for_sleep(True)
    assert w.wait(5) == len(state)
    logind.prepare_for_sleep(False)
    assert wait_until(lambda: stat(pfs, "success") == b"1\n")


def test_block_inhibitor_of_another_user_fails_with_ebusy(logind, mount):
    logind.fail_method("SuspendWithFlags",
                       "org.freedesktop.login1.BlockedByInhibitorLock",
                       "Operation denied due to active block inhibitor",
                       in_sig="t")
    pfs = mount("--backend=logind")
    with raises_errno(errno.EBUSY):
        write_state(pfs, b"mem")
    assert logind.calls("Suspend") == []    # no way around the lock
    assert stat(pfs, "fail") == b"1\n"
    assert stat(pfs, "failed_suspend") == b"1\n"
    assert stat(pfs, "last_failed_errno") == b"-16\n"
    assert stat(pfs, "last_failed_step") == b"suspend\n"
    assert "BlockedByInhibitorLock" in pfs.log()


def test_logind_without_with_flags_gets_plain_calls(logind, mount):
    """dbusmock, like systemd before 246, has no SuspendWithFlags: powerfs
    falls back to Suspend(false), and remembers."""
    pfs = mount("--backend=logind")
    for n in (1, 2):
        w = Background(write_state, pfs, b"mem")
        assert wait_until(lambda: len(logind.calls("Suspend")) == n, 5)
        logind.prepare_for_sleep(True)
        assert w.wait(5) == 3
        logind.prepare_for_sleep(False)
        assert wait_until(
            lambda: stat(pfs, "success") == f"{n}\n".encode())
    assert logind.calls("Suspend") == [[False], [False]]
    assert pfs.log().count("logind has no SuspendWithFlags") == 1


# --- the block inhibitor follows the locks ---------------------------------

# Inhibit(block) refused with OperationInProgress the first `n` times (as a
# real logind does around a sleep), then the template's own Inhibit.
FLAKY_INHIBIT = """
self.refused = getattr(self, 'refused', 0)
if args[3] == 'block' and self.refused < {n}:
    self.refused += 1
    raise dbus.exceptions.DBusException(
        'The operation inhibition has been requested for is already running',
        name='org.freedesktop.login1.OperationInProgress')
import dbusmock.templates.logind as template
ret = template.Inhibit(self, *args)
"""


def test_refused_block_inhibitor_is_retried(logind, mount):
    pfs = mount("--backend=logind", "--inhibit-sleep")
    assert wait_until(lambda: logind.powerfs_inhibitors())
    logind.add_method("Inhibit", "ssss", "h", FLAKY_INHIBIT.format(n=3))
    pfs.lock("radio")
    assert wait_until(logind.blocks, 10)
    assert logind.blocks() == [("sleep", "powerfs", "powerfs: held by radio",
                                "block")]
    assert len(logind.inhibit_calls("block")) == 4
    log = pfs.log()
    assert log.count("OperationInProgress") == 1    # once, not per retry
    assert "holding the block inhibitor at last" in log
    pfs.unlock("radio")
    assert wait_until(lambda: not logind.blocks())


def test_no_retry_once_no_lock_is_left(logind, mount):
    pfs = mount("--backend=logind", "--inhibit-sleep")
    assert wait_until(lambda: logind.powerfs_inhibitors())
    logind.add_method("Inhibit", "ssss", "h", FLAKY_INHIBIT.format(n=10**6))
    pfs.lock("radio")
    # Refused at once, then after 0.1 and 0.2 s of back-off.
    assert wait_until(lambda: len(logind.inhibit_calls("block")) >= 3, 10)
    pfs.unlock("radio")
    n = len(logind.inhibit_calls("block"))
    # The next retry would be due 0.4 s after the last refusal: at most
    # that one in a window of 1.5 s, then none in another.
    time.sleep(1.5)
    assert len(logind.inhibit_calls("block")) in (n, n + 1)
    m = len(logind.inhibit_calls("block"))
    time.sleep(1.5)
    assert len(logind.inhibit_calls("block")) == m
    assert logind.blocks() == []


def test_lock_name_that_is_not_utf8(logind, mount, monkeypatch):
    # A GLib-CRITICAL (invalid UTF-8 in a D-Bus string) aborts the server.
    monkeypatch.setenv("G_DEBUG", "fatal-criticals")
    pfs = mount("--backend=logind", "--inhibit-sleep")
    pfs.lock(b"\xff\xferadio")
    assert wait_until(logind.blocks, 5)
    assert logind.blocks() == [("sleep", "powerfs",
                                "powerfs: held by \ufffd\ufffdradio", "block")]
    pfs.unlock(b"\xff\xferadio")
    assert wait_until(lambda: not logind.blocks())
    assert pfs.alive()


# --- the host kernel's word on each sleep ----------------------------------

class KernelStats:
    """A stand-in for the host's /sys/power/suspend_stats, which the test
    writes as the kernel would."""

    def __init__(self, path):
        self.path = path
        os.mkdir(path)
        self.write(success=0, fail=0, last_failed_errno=0,
                   last_failed_step="")

    def write(self, **values):
        for name, value in values.items():
            with open(os.path.join(self.path, name), "w") as f:
                f.write(f"{value}\n")

    def arg(self):
        return f"--host-suspend-stats={self.path}"


@pytest.fixture
def kernel(tmp_path):
    return KernelStats(str(tmp_path / "suspend_stats"))


def sleep_with_kernel(logind, kernel, **after):
    """Play one sleep of the host: the kernel's counters become `after`
    between PrepareForSleep(true) and (false)."""
    logind.prepare_for_sleep(True)
    # powerfs reads the counters before it lets go of its delay inhibitor.
    assert wait_until(lambda: not logind.powerfs_inhibitors())
    kernel.write(**after)
    logind.prepare_for_sleep(False)


def own_sleep(logind, pfs, kernel, **after):
    n = len(logind.calls("Suspend"))
    w = Background(write_state, pfs, b"mem")
    assert wait_until(lambda: len(logind.calls("Suspend")) > n, 5)
    assert wait_until(lambda: logind.powerfs_inhibitors())
    sleep_with_kernel(logind, kernel, **after)
    assert w.wait(5) == 3    # answered when the sleep began


def all_stats(pfs):
    return {name: stat(pfs, name).decode().strip()
            for name in conftest.STATS_FILES}


def expected_stats(**changes):
    st = {name: "0" for name in conftest.STATS_COUNTERS}
    st.update(last_failed_errno="0", last_failed_dev="", last_failed_step="")
    st.update({k: str(v) for k, v in changes.items()})
    return st


@pytest.mark.parametrize("own", [True, False], ids=["own", "foreign"])
def test_sleep_the_kernel_failed_is_a_failure(logind, mount, kernel, own):
    pfs = mount("--backend=logind", kernel.arg())
    assert wait_until(lambda: logind.powerfs_inhibitors())
    after = dict(fail=1, last_failed_errno=-11,
                 last_failed_step="suspend_noirq")
    if own:
        own_sleep(logind, pfs, kernel, **after)
    else:
        sleep_with_kernel(logind, kernel, **after)
    assert wait_until(lambda: stat(pfs, "fail") == b"1\n")
    assert all_stats(pfs) == expected_stats(
        fail=1, failed_suspend_noirq=1, last_failed_errno=-11,
        last_failed_step="suspend_noirq")
    assert "(suspend_noirq): Resource temporarily unavailable" in pfs.log()


@pytest.mark.parametrize("own", [True, False], ids=["own", "foreign"])
def test_sleep_the_kernel_counted_is_a_success(logind, mount, kernel, own):
    kernel.write(success=7, fail=2, last_failed_errno=-16,
                 last_failed_step="freeze")
    pfs = mount("--backend=logind", kernel.arg())
    assert wait_until(lambda: logind.powerfs_inhibitors())
    if own:
        own_sleep(logind, pfs, kernel, success=8)
    else:
        sleep_with_kernel(logind, kernel, success=8)
    assert wait_until(lambda: stat(pfs, "success") == b"1\n")
    assert all_stats(pfs) == expected_stats(success=1)


def test_kernel_failures_then_success(logind, mount, kernel):
    """Each sleep is judged by what the kernel counted during it; a
    failure at a step powerfs does not know counts as "suspend"."""
    pfs = mount("--backend=logind", kernel.arg())
    assert wait_until(lambda: logind.powerfs_inhibitors())
    sleep_with_kernel(logind, kernel, fail=1, last_failed_errno=-16,
                      last_failed_step="freeze")
    assert wait_until(lambda: logind.powerfs_inhibitors())
    own_sleep(logind, pfs, kernel, fail=2, last_failed_errno=-5,
              last_failed_step="teleport")
    assert wait_until(lambda: stat(pfs, "fail") == b"2\n")
    assert wait_until(lambda: logind.powerfs_inhibitors())
    own_sleep(logind, pfs, kernel, success=1)
    assert wait_until(lambda: stat(pfs, "success") == b"1\n")
    assert all_stats(pfs) == expected_stats(
        success=1, fail=2, failed_freeze=1, failed_suspend=1,
        last_failed_errno=-5, last_failed_step="suspend")


@pytest.mark.parametrize("own", [True, False], ids=["own", "foreign"])
def test_every_failure_the_kernel_counted_in_one_sleep(logind, mount, kernel,
                                                       own):
    """systemd-sleep tries mem, then freeze, within one sleep: the kernel
    counts two failures (seen in make check-vm), and so does powerfs."""
    pfs = mount("--backend=logind", kernel.arg())
    assert wait_until(lambda: logind.powerfs_inhibitors())
    after = dict(fail=2, last_failed_errno=-16, last_failed_step="freeze")
    if own:
        own_sleep(logind, pfs, kernel, **after)
    else:
        sleep_with_kernel(logind, kernel, **after)
    assert wait_until(lambda: stat(pfs, "fail") == b"2\n")
    assert all_stats(pfs) == expected_stats(
        fail=2, failed_freeze=2, last_failed_errno=-16,
        last_failed_step="freeze")


@pytest.mark.parametrize("own", [True, False], ids=["own", "foreign"])
def test_failure_then_success_in_one_sleep(logind, mount, kernel, own):
    pfs = mount("--backend=logind", kernel.arg())
    assert wait_until(lambda: logind.powerfs_inhibitors())
    after = dict(success=1, fail=1, last_failed_errno=-16,
                 last_failed_step="freeze")
    if own:
        own_sleep(logind, pfs, kernel, **after)
    else:
        sleep_with_kernel(logind, kernel, **after)
    assert wait_until(lambda: stat(pfs, "success") == b"1\n")
    assert all_stats(pfs) == expected_stats(
        success=1, fail=1, failed_freeze=1, last_failed_errno=-16,
        last_failed_step="freeze")


def test_unreadable_kernel_stats_count_a_success(logind, mount, tmp_path):
    missing = tmp_path / "no-such-dir"
    pfs = mount("--backend=logind", f"--host-suspend-stats={missing}")
    assert wait_until(lambda: logind.powerfs_inhibitors())
    logind.prepare_for_sleep(True)
    logind.prepare_for_sleep(False)
    assert wait_until(lambda: stat(pfs, "success") == b"1\n")
    assert stat(pfs, "fail") == b"0\n"
    assert f"{missing} not readable" in pfs.log()


def test_host_suspend_stats_needs_logind(tmp_path):
    r = subprocess.run([conftest.POWERFS, "--host-suspend-stats=/tmp",
                        str(tmp_path)], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2
    assert "--host-suspend-stats needs --backend=logind" in r.stderr


# Logind announcing the sleep and its end, then refusing the call anyway
# (a failed StartUnit: systemd sends PrepareForSleep(false) before its
# error reply).
SLEEP_THEN_REFUSE = """
self.EmitSignal('org.freedesktop.login1.Manager', 'PrepareForSleep', 'b',
                [True])
self.EmitSignal('org.freedesktop.login1.Manager', 'PrepareForSleep', 'b',
                [False])
raise dbus.exceptions.DBusException('refused after the signals',
                                    name='org.freedesktop.DBus.Error.Failed')
"""


def test_refusal_after_prepare_for_sleep_is_counted_once(logind, mount):
    logind.add_method("Suspend", "b", "", SLEEP_THEN_REFUSE)
    logind.add_method("SuspendWithFlags", "t", "", SLEEP_THEN_REFUSE)
    pfs = mount("--backend=logind")
    assert write_state(pfs, b"mem") == 3
    assert wait_until(lambda: "refused after the signals" in pfs.log())
    assert wait_until(lambda: stat(pfs, "success") == b"1\n")
    assert stat(pfs, "fail") == b"0\n"
    # The attempt is over: the next one runs.
    logind.add_method("SuspendWithFlags", "t")
    w = Background(write_state, pfs, b"mem")
    assert wait_until(lambda: logind.calls("SuspendWithFlags") == [[1]] * 2)
    logind.prepare_for_sleep(True)
    assert w.wait(5) == 3
    logind.prepare_for_sleep(False)
    assert wait_until(lambda: stat(pfs, "success") == b"2\n")
    assert stat(pfs, "fail") == b"0\n"


# --- the journal: the host's sleeps that others started ---------------------

def journal_lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("fails", [False, True], ids=["slept", "failed"])
def test_foreign_sleep_in_the_journal(logind, mount, kernel, tmp_path, fails):
    """A sleep someone else started is a "sleep" event (the report shades
    it); one the host kernel failed is a "suspend" by "host" with its step
    and errno."""
    jpath = tmp_path / "journal"
    mount("--backend=logind", kernel.arg(), f"--journal={jpath}")
    assert wait_until(lambda: logind.powerfs_inhibitors())
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    after = (dict(fail=1, last_failed_errno=-11, last_failed_step="suspend_noirq")
             if fails else dict(success=1))
    sleep_with_kernel(logind, kernel, **after)
    assert wait_until(lambda: len(journal_lines(jpath)) >= 2)
    t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    e = journal_lines(jpath)[-1]
    assert t0 <= e["start"] <= e["end"] == e["t"] <= t1
    assert e["start_wall"] <= e["end_wall"] == e["wall"]
    fields = {k: v for k, v in e.items()
              if k not in ("t", "wall", "start", "end", "start_wall", "end_wall")}
    if fails:
        assert fields == {"ev": "suspend", "state": "", "by": "host", "result": -11,
                          "step": "suspend_noirq", "active": [], "signalled": []}
    else:
        assert fields == {"ev": "sleep"}
