"""--wakeup-reasons=DIR: the Android common kernel's /sys/kernel/wakeup_reasons
(kernel/power/wakeup_reason.c), a second mount served by the same process.
last_resume_reason says why the last suspend attempt ended: the waking IRQs
("%d %s\\n" each), "Abort: %s" when a wakeup event aborted it, "-1 %s" for a
wakeup that was no IRQ, nothing when nothing is known.  last_suspend_time
says how long the attempt took awake and how long the system slept."""

import errno
import os
import re
import signal
import threading
import time

import pytest

from conftest import (ExtraMounts, mounts_of, raises_errno, run_in_child,
                      wait_until)

TIMES = re.compile(rb"([0-9]+)\.([0-9]{9}) ([0-9]+)\.([0-9]{9})\n")


class Reasons(ExtraMounts):
    def __init__(self, *args):
        super().__init__(*args, extra=("wakeup-reasons",))
        self.wr = self.extra["wakeup-reasons"]

    def reason(self):
        with open(os.path.join(self.wr, "last_resume_reason"), "rb") as f:
            return f.read()

    def times(self):
        """(awake, asleep) in seconds, as the kernel prints them."""
        with open(os.path.join(self.wr, "last_suspend_time"), "rb") as f:
            data = f.read()
        m = TIMES.fullmatch(data)
        assert m, data
        a, an, s, sn = (int(x) for x in m.groups())
        return a + an / 1e9, s + sn / 1e9


@pytest.fixture
def wrfs():
    yield from mounts_of(Reasons)


def test_two_read_only_files_empty_at_first(wrfs):
    p = wrfs("-o", "allow_other")
    assert sorted(os.listdir(p.wr)) == ["last_resume_reason",
                                        "last_suspend_time"]
    for name in os.listdir(p.wr):
        st = os.stat(os.path.join(p.wr, name))
        assert (st.st_mode, st.st_size, st.st_uid) == (0o100444, 4096, 0)
        # A sysfs attribute without a store: not even root may write.
        with raises_errno(errno.EACCES):
            os.open(os.path.join(p.wr, name), os.O_WRONLY)
    assert p.reason() == b""
    with open(os.path.join(p.wr, "last_suspend_time"), "rb") as f:
        assert f.read() == b"0.000000000 0.000000000\n"
    # Anyone may read them.
    assert run_in_child(p.times, uid=1000, gid=1000, groups=[]) == (0, 0)


def test_a_simulated_sleep_says_how_long_it_was(wrfs):
    p = wrfs("--simulate-sleep-ms=300")
    assert p.write("state", b"mem") == 3
    assert p.reason() == b"-1 simulated sleep ended"
    awake, asleep = p.times()
    assert 0.3 <= asleep < 5, asleep
    assert awake < 1, awake


def test_a_wakeup_event_ends_a_simulated_sleep_and_is_named(wrfs):
    p = wrfs("-d", "--simulate-sleep-ms=30000")
    done = []
    writer = threading.Thread(
        target=lambda: done.append(p.write("state", b"mem")))
    t0 = time.monotonic()
    writer.start()
    assert wait_until(lambda: "simulating mem" in p.log(), timeout=10)
    p.lock("host_says_wake_up")
    writer.join(10)
    assert done == [3]
    assert p.reason() == b"-1 host_says_wake_up"
    awake, asleep = p.times()
    assert asleep < time.monotonic() - t0 < 20
    p.unlock("host_says_wake_up")


def test_an_aborted_attempt_names_the_pending_sources(wrfs):
    """pm_get_active_wakeup_sources(): the active sources, newest first,
    each followed by a space."""
    p = wrfs()
    count = p.read("wakeup_count")
    p.write("wakeup_count", count)
    p.lock("first", "second")
    with raises_errno(errno.EBUSY):
        p.write("state", b"mem")
    assert p.reason() == b"Abort: Pending Wakeup Sources: second first "
    assert p.times()[1] == 0
    p.unlock("first", "second")


def test_an_aborted_attempt_names_the_last_active_source(wrfs):
    p = wrfs()
    p.lock("older")
    p.unlock("older")
    count = p.read("wakeup_count")
    p.write("wakeup_count", count)
    p.lock("latest")
    p.unlock("latest")
    with raises_errno(errno.EBUSY):
        p.write("state", b"mem")
    assert p.reason() == b"Abort: Last active Wakeup Source: latest"


def test_autosleep_fills_them_too(wrfs):
    p = wrfs("--simulate-sleep-ms=200")
    p.write("autosleep", b"mem")
    assert wait_until(lambda: p.read("suspend_stats/success") != b"0\n",
                      timeout=10)
    p.write("autosleep", b"off")
    assert p.reason() == b"-1 simulated sleep ended"
    assert p.times()[1] >= 0.2


def test_a_reader_keeping_its_fds_rereads_after_each_attempt(wrfs):
    """As SystemSuspend does: both files opened once, lseek(0) and one read
    after every attempt."""
    p = wrfs("--simulate-sleep-ms=100")
    fds = [os.open(os.path.join(p.wr, n), os.O_RDONLY | os.O_CLOEXEC)
           for n in ("last_resume_reason", "last_suspend_time")]
    try:
        seen = []
        for lock in ("a", None, "b"):
            count = p.read("wakeup_count")
            p.write("wakeup_count", count)
            if lock:
                p.lock(lock)
                p.unlock(lock)
            try:
                p.write("state", b"mem")
            except OSError as e:
                assert e.errno == errno.EBUSY
            for fd in fds:
                os.lseek(fd, 0, os.SEEK_SET)
            seen.append(os.read(fds[0], 4096))
            assert TIMES.fullmatch(os.read(fds[1], 4096))
        assert seen == [b"Abort: Last active Wakeup Source: a",
                        b"-1 simulated sleep ended",
                        b"Abort: Last active Wakeup Source: b"]
    finally:
        for fd in fds:
            os.close(fd)


# --- the host's word: the IRQ that woke it ----------------------------------------

def fake_host(tmp_path, irq=None, actions=None):
    power = tmp_path / "sys" / "power"
    power.mkdir(parents=True)
    (power / "state").write_bytes(b"freeze mem\n")
    if irq is not None:
        (power / "pm_wakeup_irq").write_bytes(irq)
    if actions is not None:
        d = tmp_path / "sys" / "kernel" / "irq" / "8"
        d.mkdir(parents=True)
        (d / "actions").write_bytes(actions)
    return power


@pytest.mark.parametrize("irq,actions,reason", [
    (b"8\n", b"rtc0\n", b"8 rtc0\n"),
    (b"8\n", b"i8042, rtc0\n", b"8 i8042\n"),
    (b"8\n", None, b"8 (unnamed)\n"),
    (b"8\n", b"\n", b"8 (unnamed)\n"),
    (None, b"rtc0\n", b""),
    (b"nonsense\n", b"rtc0\n", b""),
])
def test_the_waking_irq_comes_from_the_host(wrfs, tmp_path, irq, actions,
                                            reason):
    """The sysfs backend's host says which IRQ woke it (pm_wakeup_irq) and
    the host's irq directory names its handlers; nothing is made up."""
    host = fake_host(tmp_path, irq, actions)
    p = wrfs(f"--backend=sysfs:{host}")
    # Answered as the host's sleep begins; it is over once counted.
    assert p.write("state", b"mem") == 3
    assert wait_until(lambda: p.read("suspend_stats/success") == b"1\n",
                      timeout=10)
    assert (host / "state").read_bytes().startswith(b"mem")
    assert p.reason() == reason


def test_the_last_reasons_survive_a_crash_of_the_server(wrfs):
    """Android reads them after each attempt: a server that dies between
    the attempt and that read must not leave its successor with nothing."""
    p = wrfs("--simulate-sleep-ms=100")
    count = p.read("wakeup_count")
    p.write("wakeup_count", count)
    p.lock("x")
    p.unlock("x")
    with raises_errno(errno.EBUSY):
        p.write("state", b"mem")
    assert p.write("state", b"mem") == 3
    reason = p.reason()
    with open(os.path.join(p.wr, "last_suspend_time"), "rb") as f:
        times = f.read()
    assert reason == b"-1 simulated sleep ended"
    server = p.server_pid()
    os.kill(server, signal.SIGKILL)
    assert wait_until(lambda: p.server_pid() != server, timeout=10)
    assert p.reason() == reason
    with open(os.path.join(p.wr, "last_suspend_time"), "rb") as f:
        assert f.read() == times
