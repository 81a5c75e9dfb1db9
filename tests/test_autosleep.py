"""autosleep (SPEC.md): the setting, its events, the loop, and what it
blocks."""

import contextlib
import errno
import time

import pytest

from conftest import Background, raises_errno, wait_until

SHARED_ARGS = ("--simulate-sleep-ms=50",)


@contextlib.contextmanager
def autosleep(p, state=b"mem"):
    assert p.write("autosleep", state) == len(state)
    try:
        yield
    finally:
        p.write("autosleep", b"off")


def test_read_off(pfs):
    assert pfs.read("autosleep") == b"off\n"


@pytest.mark.parametrize("cmd,shown", [
    (b"mem", b"mem\n"), (b"mem\n", b"mem\n"), (b"mem\njunk", b"mem\n"),
    (b"freeze", b"freeze\n"), (b"disk", b"disk\n")], ids=repr)
def test_enable(pfs, cmd, shown):
    with autosleep(pfs, cmd):
        assert pfs.read("autosleep") == shown
    assert pfs.read("autosleep") == b"off\n"


@pytest.mark.parametrize("cmd", [b"off", b"off\n", b"off\0junk"], ids=repr)
def test_disable(pfs, cmd):
    with autosleep(pfs):
        assert pfs.write("autosleep", cmd) == len(cmd)
        assert pfs.read("autosleep") == b"off\n"


@pytest.mark.parametrize("cmd", [b"on", b"off ", b"offx", b"foo", b"\n", b"OFF",
                                 b"MEM", b"mem ", b"standby", b"off\n\n",
                                 b" off", b"of", b"\0", b"mem\0"], ids=repr)
def test_einval(pfs, cmd):
    n = pfs.count()
    events = pfs.source("autosleep").event_count
    with raises_errno(errno.EINVAL):
        pfs.write("autosleep", cmd)
    assert pfs.read("autosleep") == b"off\n"
    assert pfs.count() == n
    assert pfs.source("autosleep").event_count == events


def test_einval_keeps_it_on(pfs):
    with autosleep(pfs):
        with raises_errno(errno.EINVAL):
            pfs.write("autosleep", b"on")
        assert pfs.read("autosleep") == b"mem\n"


def test_disk_without_hibernation(mount):
    p = mount("--simulate-states=freeze,mem")
    for cmd in (b"disk", b"disk\n", b"standby"):
        with raises_errno(errno.EINVAL):
            p.write("autosleep", cmd)
    assert p.read("autosleep") == b"off\n"


def test_every_accepted_write_counts_one_event(pfs):
    n = pfs.count()
    s0 = pfs.source("autosleep")
    assert pfs.write("autosleep", b"off") == 3      # already off: counts too
    assert pfs.count() == n + 1
    s1 = pfs.source("autosleep")
    assert s1.event_count == s0.event_count + 1
    assert s1.active_count == s0.active_count + 1
    assert s1.active_since == 0
    assert pfs.write("autosleep", b"off\n") == 4
    assert pfs.count() == n + 2
    with autosleep(pfs):
        assert pfs.count() == n + 3
    assert pfs.count() == n + 4
    assert pfs.source("autosleep").event_count == s0.event_count + 4


def test_state_and_wakeup_count_are_busy_while_on(pfs):
    n = pfs.count()
    with autosleep(pfs):
        for cmd in (b"mem", b"foo", b"\n", b"disk"):
            with raises_errno(errno.EBUSY):
                pfs.write("state", cmd)
        for cmd in (b"%d" % (n + 1), b"%d" % (n + 2), b"foo", b"\n"):
            with raises_errno(errno.EBUSY):
                pfs.write("wakeup_count", cmd)
        # autosleep itself is never busy.
        assert pfs.write("autosleep", b"freeze") == 6
        assert pfs.read("autosleep") == b"freeze\n"
        assert pfs.write("autosleep", b"mem") == 3
    with raises_errno(errno.EINVAL):
        pfs.write("state", b"foo")
    with raises_errno(errno.EINVAL):
        pfs.write("wakeup_count", b"foo")


def test_suspends_while_idle(pfs):
    s0 = pfs.stat("success")
    with autosleep(pfs):
        assert wait_until(lambda: pfs.stat("success") >= s0 + 2, timeout=8), \
            "autosleep without locks did not suspend repeatedly"
    s1 = pfs.stat("success")
    time.sleep(1.0)     # none in a window of 1 s (off waited for the last)
    assert pfs.stat("success") == s1, "suspends went on after autosleep off"


def test_a_held_lock_prevents_suspend(pfs):
    s0 = pfs.stat("success")
    pfs.lock("hold")
    try:
        with autosleep(pfs):
            time.sleep(1.2)     # none in a window of 1.2 s
            assert pfs.stat("success") == s0, "suspended with a lock held"
            pfs.unlock("hold")
            assert wait_until(lambda: pfs.stat("success") > s0, timeout=8)
            pfs.lock("hold")
            # An autosleep write waits for the transition lock: once it
            # returns, a suspend that was in progress has ended and counted.
            assert pfs.write("autosleep", b"mem") == 3
            s1 = pfs.stat("success")
            time.sleep(1.2)     # none in a window of 1.2 s
            assert pfs.stat("success") == s1, "suspended with a lock held"
    finally:
        pfs.unlock("hold")


def test_prevent_suspend_time(pfs):
    pfs.lock("ps_idle")
    pfs.unlock("ps_idle")
    pfs.lock("ps")
    try:
        time.sleep(0.2)          # held 0.2 s without autosleep: not counted
        assert pfs.source("ps").prevent_suspend_time == 0
        t0 = time.monotonic()
        with autosleep(pfs):
            pfs.lock("ps_late")   # deviation: later sources count too
            time.sleep(0.5)      # counted: 0.5 s held with autosleep on
            rows = pfs.sources()
            limit = (time.monotonic() - t0) * 1000 + 50
            assert 400 <= rows[b"ps"].prevent_suspend_time <= limit
            assert 400 <= rows[b"ps_late"].prevent_suspend_time <= limit
            assert rows[b"ps_idle"].prevent_suspend_time == 0
        p1 = pfs.source("ps").prevent_suspend_time
        time.sleep(0.3)          # no growth in a window of 0.3 s
        assert pfs.source("ps").prevent_suspend_time == p1
    finally:
        pfs.unlock("ps", "ps_late")


def test_an_autosleep_write_during_a_suspend_wakes_it_first(mount):
    """The kernel signals the autosleep source before it takes the
    transition lock that a suspend holds: an autosleep write during a
    (simulated) sleep is a wakeup event that ends it, and only then takes
    effect, after the state write has its answer."""
    p = mount("-d", "--simulate-sleep-ms=30000")
    state = Background(p.write, "state", b"mem")
    assert wait_until(lambda: "simulating mem" in p.log(), timeout=10)
    assert not state.finished.is_set()
    auto = Background(p.write, "autosleep", b"off")
    assert auto.wait(20) == 3
    assert state.wait(20) == 3
    assert state.elapsed() < 15, "the autosleep write did not wake the sleep"
    assert p.read("autosleep") == b"off\n"
    assert p.stat("success") == 1
    assert p.source("autosleep").event_count == 1


def test_pause_after_a_wakeup_without_events(mount):
    # With nothing registering events, each cycle is followed by a 0.5 s
    # pause: about 3 suspends in 1.2 s, not one every 10 ms.
    p = mount("--simulate-sleep-ms=10")
    with autosleep(p):
        time.sleep(1.2)          # the suspends of 1.2 s are counted
    n = p.stat("success")
    assert 2 <= n <= 5, f"{n} suspends in 1.2 s"


# --- the kernel's single work item (SPEC.md, kernel-observed 3/3) ----------------------

def handshake_armed(path):
    """The state file says the handshake is armed (powerfs(5): the last
    line "counts REGISTERED ARMED SAVED")."""
    try:
        text = path.read_bytes().split(b"\0", 1)[0].decode()
    except FileNotFoundError:
        return False
    counts = [line.split() for line in text.splitlines()
              if line.startswith("counts ")]
    return bool(counts) and counts[-1][2] == "1"


def test_off_does_not_stop_a_run_waiting_for_a_lock(mount, tmp_path):
    """lock h; autosleep mem; off; unlock h: the run that waited for h still
    arms the handshake, so after an event the next direct suspend fails
    with EBUSY, once.  (The kernel's sequence waits 0.5 s after the unlock;
    here the state file says when the run has armed the handshake.)"""
    state = tmp_path / "state"
    pfs = mount(*SHARED_ARGS, f"--state-file={state}")
    pfs.lock("h")
    assert pfs.write("autosleep", b"mem") == 3
    assert pfs.write("autosleep", b"off") == 3
    assert not handshake_armed(state)
    pfs.unlock("h")
    assert wait_until(lambda: handshake_armed(state)), \
        "the run that waited for the lock did not arm the handshake"
    fails = pfs.stat("fail")
    pfs.lock("z")
    pfs.unlock("z")
    assert pfs.source("z").wakeup_count == 1
    with raises_errno(errno.EBUSY):
        pfs.write("state", b"mem")
    assert pfs.stat("fail") == fails + 1
    assert pfs.read("suspend_stats/last_failed_step") == b"freeze\n"
    assert pfs.read("suspend_stats/last_failed_errno") == b"-16\n"
    assert pfs.write("state", b"mem") == 3


def test_off_does_not_stop_a_queued_run(mount, tmp_path):
    """lock x; autosleep mem twice; unlock x; 0.1 s; off: the run queued by
    the second write still arms the handshake after the first has
    suspended.  (Here "0.1 s" is: until the first run's suspend has
    begun, as the log says; and the state file says when the queued run
    has armed the handshake.)"""
    state = tmp_path / "state"
    pfs = mount(*SHARED_ARGS, f"--state-file={state}")
    pfs.lock("x2")
    assert pfs.write("autosleep", b"mem") == 3
    assert pfs.write("autosleep", b"mem") == 3
    ok = pfs.stat("success")
    pfs.unlock("x2")
    assert wait_until(lambda: "suspending to mem" in pfs.log())
    assert pfs.write("autosleep", b"off") == 3
    assert wait_until(lambda: pfs.stat("success") == ok + 1, timeout=5)
    assert wait_until(lambda: handshake_armed(state)), \
        "the queued run did not arm the handshake"
    time.sleep(1)               # no other suspend in a window of 1 s
    assert pfs.stat("success") == ok + 1
    pfs.lock("z2")
    pfs.unlock("z2")
    assert pfs.source("z2").wakeup_count == 1
    with raises_errno(errno.EBUSY):
        pfs.write("state", b"mem")
