"""wakeup_count (SPEC.md): the registered event count, the blocking read and
its interruption, and the write side of the suspend handshake."""

import errno
import os
import re
import signal
import time

import pytest

from conftest import Reader, raises_errno, timed

U32 = 2 ** 32


def disarm(p):
    """End an armed handshake: a failed (stale) write disarms it."""
    n = p.count()
    with raises_errno(errno.EINVAL):
        p.write("wakeup_count", b"%d" % ((n + 12345) % U32))


def test_read_format(pfs):
    data = pfs.read("wakeup_count")
    assert re.fullmatch(rb"(0|[1-9][0-9]*)\n", data), data


def test_initial_count_is_zero(mount):
    p = mount()
    assert p.read("wakeup_count") == b"0\n"


def test_each_deactivation_registers_one_event(pfs):
    n = pfs.count()
    pfs.lock("ev")
    pfs.unlock("ev")
    assert pfs.count() == n + 1
    pfs.unlock("ev")              # already inactive: nothing
    assert pfs.count() == n + 1
    pfs.lock("ev", "ev", "ev")    # one activation
    pfs.unlock("ev")
    assert pfs.count() == n + 2
    pfs.lock("ev", "ev2")
    pfs.unlock("ev", "ev2")
    assert pfs.count() == n + 4


def test_read_blocks_while_a_lock_is_held(pfs):
    n = pfs.count()
    pfs.lock("blk")
    try:
        with Reader(pfs.path("wakeup_count")) as r:
            r.wait_in_read()
            assert r.blocked(0.3), f"read returned with a lock held: {r.result()}"
            pfs.unlock("blk")
            assert r.result() == (len(b"%d\n" % (n + 1)), 0, b"%d\n" % (n + 1))
    finally:
        pfs.unlock("blk")


def test_read_blocks_until_the_last_lock_goes(pfs):
    n = pfs.count()
    pfs.lock("blk1", "blk2")
    try:
        with Reader(pfs.path("wakeup_count")) as r:
            r.wait_in_read()
            pfs.unlock("blk1")
            assert r.blocked(0.3), "read returned with a lock still held"
            pfs.unlock("blk2")
            assert r.result()[2] == b"%d\n" % (n + 2)
    finally:
        pfs.unlock("blk1", "blk2")


def test_read_blocks_until_a_timeout_expires(pfs):
    n = pfs.count()
    with Reader(pfs.path("wakeup_count")) as r:
        assert r.result()[2] == b"%d\n" % n
    pfs.lock(b"blkt %d" % 500_000_000)
    with Reader(pfs.path("wakeup_count")) as r:
        assert r.result(5)[2] == b"%d\n" % (n + 1)


def test_pread_at_an_offset_blocks_too(pfs):
    n = pfs.count()
    pfs.lock("blkp")
    try:
        with Reader(pfs.path("wakeup_count"), offset=1) as r:
            r.wait_in_read()
            assert r.blocked(0.3), f"pread returned with a lock held: {r.result()}"
            pfs.unlock("blkp")
            assert r.result()[2] == (b"%d\n" % (n + 1))[1:]
    finally:
        pfs.unlock("blkp")


@pytest.mark.parametrize("mode", ["handler", "restart"])
def test_signal_interrupts_a_blocked_read(pfs, mode):
    pfs.lock("intr")
    try:
        with Reader(pfs.path("wakeup_count"), mode=mode) as r:
            r.wait_in_read()
            t0 = time.monotonic()
            os.kill(r.proc.pid, signal.SIGUSR1)
            n, err, _ = r.result(3)
            assert (n, err) == (-1, errno.EINTR), \
                f"expected EINTR, got n={n} errno={err}"
            assert time.monotonic() - t0 < 2
        assert pfs.active() == [b"intr"]
    finally:
        pfs.unlock("intr")


def test_sigstop_sigcont_interrupts_a_blocked_read(pfs):
    pfs.lock("stop")
    try:
        with Reader(pfs.path("wakeup_count")) as r:
            r.wait_in_read()
            os.kill(r.proc.pid, signal.SIGSTOP)
            time.sleep(0.2)     # stopped for 0.2 s, on purpose
            os.kill(r.proc.pid, signal.SIGCONT)
            n, err, _ = r.result(3)
            assert (n, err) == (-1, errno.EINTR)
    finally:
        pfs.unlock("stop")


def test_ignored_signal_changes_nothing(pfs):
    n = pfs.count()
    pfs.lock("ign")
    try:
        with Reader(pfs.path("wakeup_count"), mode="ignore") as r:
            r.wait_in_read()
            os.kill(r.proc.pid, signal.SIGUSR1)
            assert r.blocked(0.3), f"read ended: {r.result()}"
            pfs.unlock("ign")
            assert r.result()[2] == b"%d\n" % (n + 1)
    finally:
        pfs.unlock("ign")


def test_sigkill_ends_a_blocked_read_at_once(pfs):
    n = pfs.count()
    pfs.lock("kill")
    try:
        with Reader(pfs.path("wakeup_count")) as r:
            r.wait_in_read()
            t0 = time.monotonic()
            os.kill(r.proc.pid, signal.SIGKILL)
            r.proc.wait(3)
            assert time.monotonic() - t0 < 2
        # The server is fine afterwards.
        assert timed(pfs.read, "wake_lock") == b"kill\n"
        pfs.unlock("kill")
        assert pfs.count() == n + 1
    finally:
        pfs.unlock("kill")


def test_blocked_readers_do_not_stall_other_requests(pfs):
    n = pfs.count()
    pfs.lock("stall")
    readers = []
    try:
        # More blocked readers than libfuse's default 10 worker threads.
        for _ in range(12):
            readers.append(Reader(pfs.path("wakeup_count")))
        for r in readers:
            r.wait_in_read()
        assert timed(pfs.read, "state", timeout=3) == b"freeze mem disk\n"
        assert timed(os.listdir, pfs.path(), timeout=3)
        assert timed(pfs.read_all, "wakeup_sources", timeout=3)
        timed(pfs.lock, "stall2", timeout=3)
        timed(pfs.unlock, "stall2", timeout=3)
        assert timed(pfs.read, "wake_lock", timeout=3) == b"stall\n"
        assert all(r.blocked(0) for r in readers)
        pfs.unlock("stall")
        for r in readers:
            assert r.result(5)[2] == b"%d\n" % (n + 2)
    finally:
        for r in readers:
            r.kill()
        pfs.unlock("stall")


def test_continued_read_does_not_block(pfs):
    n = pfs.count()
    fd = os.open(pfs.path("wakeup_count"), os.O_RDONLY)
    try:
        first = os.read(fd, 1)
        pfs.lock("cont")
        try:
            rest = timed(os.read, fd, 8192, timeout=3)
        finally:
            pfs.unlock("cont")
        assert first + rest == b"%d\n" % n
    finally:
        os.close(fd)


# --- write -------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["%d", "%d\n", "%dabc", "%d.5", " %d", "\t\n%d\n",
                                 "0%d", "%d 7", "%d\0x"],
                         ids=repr)
def test_write_of_the_current_count(pfs, fmt):
    n = pfs.count()
    data = (fmt % n).encode()
    assert pfs.write("wakeup_count", data) == len(data)
    disarm(pfs)


def test_write_is_taken_modulo_2_32(pfs):
    n = pfs.count()
    for v in (n + U32, n + 5 * U32):
        data = b"%d" % v
        assert pfs.write("wakeup_count", data) == len(data)
    disarm(pfs)


@pytest.mark.parametrize("delta", [1, 10, U32 - 1, U32 + 1])
def test_write_of_a_stale_count(pfs, delta):
    n = pfs.count()
    with raises_errno(errno.EINVAL):
        pfs.write("wakeup_count", b"%d" % (n + delta))


@pytest.mark.parametrize("data", [b"foo", b"-1", b"+1", b"\n", b" ", b"\0",
                                  b"x42", b"- 1"], ids=repr)
def test_write_without_digits(pfs, data):
    with raises_errno(errno.EINVAL):
        pfs.write("wakeup_count", data)


def test_zero_length_write(pfs):
    assert pfs.write("wakeup_count", b"") == 0


def test_write_with_a_lock_active(pfs):
    n = pfs.count()
    pfs.lock("wact")
    try:
        with raises_errno(errno.EINVAL):
            pfs.write("wakeup_count", b"%d" % n)
    finally:
        pfs.unlock("wact")
    with raises_errno(errno.EINVAL):
        pfs.write("wakeup_count", b"%d" % n)     # now stale


# 131,082 writes: several times the default watchdog beside two CPU hogs.
@pytest.mark.timeout(300)
def test_count_does_not_wrap_at_16_bits(mount):
    """Deviation: the kernel's count wraps at 65536; powerfs's does not."""
    p = mount("--simulate-sleep-ms=10")
    lk = os.open(p.path("wake_lock"), os.O_WRONLY)
    ul = os.open(p.path("wake_unlock"), os.O_WRONLY)
    try:
        for _ in range(65536 + 5):
            os.write(lk, b"w16")
            os.write(ul, b"w16")
    finally:
        os.close(lk)
        os.close(ul)
    assert p.read("wakeup_count") == b"65541\n"
    with raises_errno(errno.EINVAL):
        p.write("wakeup_count", b"5")
    assert p.write("wakeup_count", b"65541") == 5
    assert p.write("state", b"mem") == 3
