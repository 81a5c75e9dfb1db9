"""state, the suspend handshake and suspend_stats (SPEC.md)."""

import errno
import json
import signal
import subprocess
import time

import pytest

from conftest import (PYTHON, STATS_COUNTERS, Background, raises_errno,
                      wait_in_syscall, wait_until)

SHARED_ARGS = ("--simulate-sleep-ms=200",)


def all_stats(p):
    return {n: p.read("suspend_stats/" + n) for n in
            STATS_COUNTERS + ("last_failed_errno", "last_failed_dev",
                              "last_failed_step")}


def test_initial_suspend_stats(mount):
    p = mount()
    st = all_stats(p)
    for n in STATS_COUNTERS:
        assert st[n] == b"0\n", n
    assert st["last_failed_errno"] == b"0\n"
    assert st["last_failed_dev"] == b"\n"
    assert st["last_failed_step"] == b"\n"


def test_read_default_states(pfs):
    assert pfs.read("state") == b"freeze mem disk\n"


@pytest.mark.parametrize("opt,shown", [
    ("mem", b"mem\n"),
    ("freeze,mem", b"freeze mem\n"),
    ("mem disk", b"mem disk\n"),
    ("standby,mem", b"standby mem\n"),
    ("freeze standby mem disk", b"freeze standby mem disk\n"),
    ("disk,mem,freeze", b"freeze mem disk\n"),    # the kernel's order
])
def test_simulate_states_option(mount, opt, shown):
    p = mount("--simulate-states=" + opt)
    assert p.read("state") == shown


@pytest.mark.parametrize("cmd", [b"on", b"mem ", b"MEM", b"mem\0", b"\n",
                                 b" mem", b"foo", b"off", b"standby", b"memx",
                                 b"me", b"mem\r\n", b"freeze mem", b"\0"],
                         ids=repr)
def test_state_write_einval(pfs, cmd):
    before = all_stats(pfs)
    with raises_errno(errno.EINVAL):
        pfs.write("state", cmd)
    assert all_stats(pfs) == before


@pytest.mark.parametrize("cmd", [b"mem", b"mem\n", b"mem\njunk", b"freeze",
                                 b"freeze\n"], ids=repr)
def test_state_write_suspends(pfs, cmd):
    before = all_stats(pfs)
    t0 = time.monotonic()
    assert pfs.write("state", cmd) == len(cmd)
    assert time.monotonic() - t0 >= 0.15, "returned before the 200 ms sleep"
    after = all_stats(pfs)
    assert int(after["success"]) == int(before["success"]) + 1
    del after["success"], before["success"]
    assert after == before


@pytest.mark.parametrize("cmd", [b"disk", b"disk\n"], ids=repr)
def test_state_write_disk(pfs, cmd):
    assert pfs.write("state", cmd) == len(cmd)


def test_disk_without_hibernation(mount):
    p = mount("--simulate-states=freeze,mem", "--simulate-sleep-ms=50")
    assert p.read("state") == b"freeze mem\n"
    before = all_stats(p)
    for cmd in (b"disk", b"disk\n"):
        with raises_errno(errno.ENOSYS):
            p.write("state", cmd)
    with raises_errno(errno.EINVAL):
        p.write("state", b"standby")
    assert all_stats(p) == before
    assert p.write("state", b"mem") == 3


def test_standby_when_supported(mount):
    p = mount("--simulate-states=standby", "--simulate-sleep-ms=50")
    assert p.read("state") == b"standby\n"
    assert p.write("state", b"standby\n") == 8
    assert p.stat("success") == 1
    with raises_errno(errno.EINVAL):
        p.write("state", b"mem")


def test_write_returns_after_the_sleep(mount):
    p = mount("--simulate-sleep-ms=700")
    t0 = time.monotonic()
    assert p.write("state", b"mem") == 3
    elapsed = time.monotonic() - t0
    assert 0.65 <= elapsed < 5, elapsed


def test_wakeup_event_ends_the_sleep_early(mount):
    p = mount("-d", "--simulate-sleep-ms=30000")
    bg = Background(p.write, "state", b"mem")
    assert wait_until(lambda: "simulating mem" in p.log(), timeout=10)
    assert not bg.finished.is_set(), "state write returned before any event"
    t0 = time.monotonic()
    p.lock("wake")
    assert bg.wait(20) == 3
    assert bg.t1 - t0 < 10, "a wake lock did not end the simulated sleep"
    p.unlock("wake")


def test_active_lock_does_not_stop_a_direct_write(pfs):
    ok = pfs.stat("success")
    pfs.lock("held")
    try:
        assert pfs.write("state", b"mem") == 3
        assert pfs.stat("success") == ok + 1
    finally:
        pfs.unlock("held")


# --- the handshake ------------------------------------------------------------------------

def test_handshake_success(pfs):
    ok = pfs.stat("success")
    n = pfs.count()
    assert pfs.write("wakeup_count", b"%d" % n) == len(b"%d" % n)
    assert pfs.write("state", b"mem") == 3
    assert pfs.stat("success") == ok + 1


def test_handshake_fails_after_an_event(mount):
    p = mount("--simulate-sleep-ms=1000")
    n = p.count()
    assert p.write("wakeup_count", b"%d\n" % n) == len(b"%d\n" % n)
    p.lock("hs")
    p.unlock("hs")
    t0 = time.monotonic()
    with raises_errno(errno.EBUSY):
        p.write("state", b"mem")
    assert time.monotonic() - t0 < 0.8, "EBUSY only after sleeping"
    st = all_stats(p)
    expected = {n: b"0\n" for n in STATS_COUNTERS}
    expected.update(fail=b"1\n", failed_freeze=b"1\n",
                    last_failed_errno=b"-16\n", last_failed_dev=b"\n",
                    last_failed_step=b"freeze\n")
    assert st == expected
    # Every attempt ends the handshake: the next write suspends.
    p.lock("hs")
    p.unlock("hs")
    assert p.write("state", b"mem") == 3
    st = all_stats(p)
    expected.update(success=b"1\n")
    assert st == expected


def test_handshake_fails_with_an_active_lock(pfs):
    before = all_stats(pfs)
    n = pfs.count()
    assert pfs.write("wakeup_count", b"%d" % n) > 0
    pfs.lock("hsa")
    try:
        with raises_errno(errno.EBUSY):
            pfs.write("state", b"mem")
    finally:
        pfs.unlock("hsa")
    after = all_stats(pfs)
    assert int(after["fail"]) == int(before["fail"]) + 1
    assert int(after["failed_freeze"]) == int(before["failed_freeze"]) + 1
    assert after["success"] == before["success"]
    assert after["last_failed_errno"] == b"-16\n"
    assert after["last_failed_step"] == b"freeze\n"


def test_handshake_ends_after_a_suspend(pfs):
    ok = pfs.stat("success")
    n = pfs.count()
    assert pfs.write("wakeup_count", b"%d" % n) > 0
    assert pfs.write("state", b"mem") == 3
    pfs.lock("hse")
    pfs.unlock("hse")
    assert pfs.write("state", b"mem") == 3
    assert pfs.stat("success") == ok + 2


def test_failed_count_write_disarms(pfs):
    ok = pfs.stat("success")
    n = pfs.count()
    assert pfs.write("wakeup_count", b"%d" % n) > 0
    with raises_errno(errno.EINVAL):
        pfs.write("wakeup_count", b"%d" % (n + 1))
    pfs.lock("hsd")
    pfs.unlock("hsd")
    assert pfs.write("state", b"mem") == 3
    assert pfs.stat("success") == ok + 1


def test_wakeup_count_column_counts_events_while_armed(pfs):
    pfs.lock("wcol")
    pfs.unlock("wcol")
    base = pfs.source("wcol")
    n = pfs.count()
    assert pfs.write("wakeup_count", b"%d" % n) > 0
    pfs.lock("wcol", "wcol")
    pfs.unlock("wcol")
    s = pfs.source("wcol")
    assert s.wakeup_count == base.wakeup_count + 2
    assert s.event_count == base.event_count + 2
    with raises_errno(errno.EBUSY):     # ends the handshake
        pfs.write("state", b"mem")
    pfs.lock("wcol")
    pfs.unlock("wcol")
    s = pfs.source("wcol")
    assert s.wakeup_count == base.wakeup_count + 2
    assert s.event_count == base.event_count + 3


def test_default_sleep_is_one_second(mount):
    p = mount()
    t0 = time.monotonic()
    assert p.write("state", b"freeze") == 6
    assert 0.9 <= time.monotonic() - t0 < 5


# --- a write waiting for the transition lock (kernel: mutex_lock_interruptible) --

_QUEUED_WRITER = r'''
import ctypes, json, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
libc.write.restype = ctypes.c_ssize_t
path, data, restart = sys.argv[1], sys.argv[2].encode(), sys.argv[3] == "1"
signal.signal(signal.SIGUSR1, lambda s, f: None)
signal.siginterrupt(signal.SIGUSR1, not restart)
fd = os.open(path, os.O_WRONLY)
print("ready", flush=True)
n = libc.write(fd, data, len(data))
print(json.dumps([n, ctypes.get_errno() if n < 0 else 0]), flush=True)
'''


def queued_writer(p, name, data, restart=False):
    w = subprocess.Popen([PYTHON, "-c", _QUEUED_WRITER, p.path(name), data,
                          "1" if restart else "0"], stdout=subprocess.PIPE)
    assert w.stdout.readline() == b"ready\n"
    return w


@pytest.mark.parametrize("restart", [False, True], ids=["plain", "SA_RESTART"])
@pytest.mark.parametrize("name,data", [("state", "mem"),
                                       ("wakeup_count", "0")])
def test_a_queued_write_gives_up_at_a_signal(mount, name, data, restart):
    """A state or wakeup_count write queued behind a suspend in progress is
    interrupted by a signal (EINTR, SA_RESTART or not), as the kernel's
    mutex_lock_interruptible() makes it; it neither waits for the suspend
    nor starts one of its own."""
    p = mount("--simulate-sleep-ms=1500")
    first = Background(p.write, "state", b"mem")
    assert wait_until(lambda: "suspending to mem" in p.log(), timeout=5)
    w = queued_writer(p, name, data, restart)
    try:
        wait_in_syscall(w, {"x86_64": ("1",), "aarch64": ("64",)}, "write")
        t0 = time.monotonic()
        w.send_signal(signal.SIGUSR1)
        out = w.stdout.readline()
        assert json.loads(out) == [-1, errno.EINTR]
        assert time.monotonic() - t0 < 0.5, "waited for the suspend"
        assert first.wait(5) == 3
        time.sleep(0.3)         # no second suspend in a window of 0.3 s
        assert p.stat("success") == 1
        assert "suspending to mem" not in p.log().split("resumed from mem")[-1]
    finally:
        w.kill()
        w.wait(5)
        w.stdout.close()


def test_an_autosleep_write_queued_behind_a_suspend_ignores_signals(mount):
    """The kernel switches autosleep under a plain mutex_lock(): the write
    waits for the suspend whatever the signals."""
    p = mount("--simulate-sleep-ms=60000")
    first = Background(p.write, "state", b"mem")
    assert wait_until(lambda: "suspending to mem" in p.log(), timeout=5)
    # The autosleep write's own event ends the simulated sleep at once; a
    # second state write keeps the lock busy meanwhile.
    w = queued_writer(p, "autosleep", "off")
    try:
        wait_in_syscall(w, {"x86_64": ("1",), "aarch64": ("64",)}, "write")
        w.send_signal(signal.SIGUSR1)
        assert json.loads(w.stdout.readline()) == [3, 0]
        assert first.wait(5) == 3
    finally:
        w.kill()
        w.wait(5)
        w.stdout.close()
