"""--backend=logind against python-dbusmock's logind template.

Each test gets a private system bus (dbus-daemon) with a fresh mock of
org.freedesktop.login1; powerfs reaches it through DBUS_SYSTEM_BUS_ADDRESS.
The mock's Suspend/Hibernate only log the call: the tests play the host's
sleep and resume by emitting PrepareForSleep themselves.  Nothing here can
suspend the machine.
"""

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

    def start_mock(self):
        args = ["/usr/bin/python3", "-m", "dbusmock", "--system",
                "--template", "logind"]
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

    def fail_method(self, method, error_name, message):
        self.obj.AddMethod(
            MANAGER, method, "b", "",
            f"raise dbus.exceptions.DBusException({message!r}, "
            f"name={error_name!r})", dbus_interface=MOCK_IFACE)


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
    time.sleep(0.2)
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
    time.sleep(0.2)
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


def test_queued_write_keeps_its_real_result_across_sleep(logind, mount):
    """Only the state write whose sleep begins is answered early; a write
    queued behind it gets its own result after the resume."""
    pfs = mount("--backend=logind")
    w = Background(write_state, pfs, b"mem")
    assert wait_until(lambda: logind.calls("Suspend"), 5)
    stale = Background(pfs.write, "wakeup_count", b"12345")
    time.sleep(0.2)
    assert not stale.finished.is_set()      # queued on the transition
    logind.prepare_for_sleep(True)
    assert w.wait(5) == 3
    time.sleep(0.2)
    assert not stale.finished.is_set()      # no made-up success
    logind.prepare_for_sleep(False)
    with raises_errno(errno.EINVAL):
        stale.wait(5)


def test_inhibit_sleep_refused_with_sysfs(tmp_path):
    (tmp_path / "state").write_text("mem\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([conftest.POWERFS, "-f", "--inhibit-sleep",
                        f"--backend=sysfs:{tmp_path}", str(mnt)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--inhibit-sleep needs --backend=logind" in r.stderr
