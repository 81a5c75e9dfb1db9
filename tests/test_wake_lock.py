"""wake_lock and wake_unlock (SPEC.md): the write grammar, timeouts, the
limit, the listings and garbage collection."""

import errno
import time

import pytest

from conftest import raises_errno, wait_until

MS = 1_000_000   # ns


def expire_count(p, name):
    s = p.sources().get(name)
    return s.expire_count if s else 0


# --- grammar ----------------------------------------------------------------------

EINVAL_LOCKS = [
    b"\n", b"   ", b" lead", b"\t", b"\xa0", b"\x00",
    b"name -5", b"name 1.5", b"name 100 200", b"name 100 ", b"name 0x10",
    b"name 18446744073709551616", b"foo\r\n", b"name \n", b"name\v",
    b"name +", b"name ++5", b"name 5\n\n", b"name 1e3", b"name abc",
    # 0xA0 is whitespace: the name ends at it and "x" is no timeout.
    b"\xc3\xa0x",
]


@pytest.mark.parametrize("cmd", EINVAL_LOCKS, ids=repr)
def test_lock_einval(pfs, cmd):
    before = pfs.sources()
    n = pfs.count()
    with raises_errno(errno.EINVAL):
        pfs.write("wake_lock", cmd)
    assert pfs.read("wake_lock") == b"\n"
    assert list(pfs.sources()) == list(before), "a failed lock created a source"
    assert pfs.count() == n


# (command, name locked, has a (tiny) timeout)
GOOD_LOCKS = [
    (b"name  100", b"name", True),
    (b"name\t100\n", b"name", True),
    (b"name +10", b"name", True),
    (b"name 010", b"name", True),
    (b"name 1\n", b"name", True),
    (b"vt\v5", b"vt", True),          # \v, \f, \r are whitespace
    (b"ff\f5", b"ff", True),
    (b"cr\r5", b"cr", True),
    (b"\xc3\xa0100", b"\xc3", True),  # "a-grave" is split at byte 0xA0
    (b"\xc3\xa00", b"\xc3", False),   # timeout 0 = none
    (b"name 0", b"name", False),
    (b"name", b"name", False),
    (b"name\n", b"name", False),
    (b"x\ny\n", b"x", False),         # bytes after the newline are ignored
    (b"lf\n5", b"lf", False),         # ... they are no timeout
    (b"nul\x00junk", b"nul", False),  # NUL ends the name
    (b"\xc3\xa9t", b"\xc3\xa9t", False),
    (b"n\x85x", b"n\x85x", False),    # 0x85 is not whitespace
    (b"a" * 300, b"a" * 300, False),
]


@pytest.mark.parametrize("cmd,name,timed_out", GOOD_LOCKS, ids=repr)
def test_lock_accepted(pfs, cmd, name, timed_out):
    before = pfs.sources().get(name)
    assert pfs.write("wake_lock", cmd) == len(cmd)
    try:
        after = pfs.source(name)
        assert after.event_count == (before.event_count if before else 0) + 1
        expired = (before.expire_count if before else 0) + 1
        if timed_out:
            assert wait_until(lambda: expire_count(pfs, name) == expired), \
                "the lock's timeout never expired"
            assert name not in pfs.active()
            assert name in pfs.inactive()
        else:
            time.sleep(0.1)     # no expiry in a window of 0.1 s
            assert pfs.active() == [name]
            assert expire_count(pfs, name) == expired - 1
    finally:
        pfs.unlock(name)


# --- timeouts --------------------------------------------------------------------------

def test_timeout_expires(pfs):
    n = pfs.count()
    t0 = time.monotonic()
    pfs.lock(b"to_a %d" % (400 * MS))
    assert pfs.active() == [b"to_a"]
    assert wait_until(lambda: pfs.active() == [], timeout=5)
    assert time.monotonic() - t0 >= 0.35, "a 400 ms timeout expired early"
    assert b"to_a" in pfs.inactive()
    s = pfs.source("to_a")
    assert (s.active_count, s.event_count, s.expire_count) == (1, 1, 1)
    assert s.active_since == 0
    assert pfs.count() == n + 1


def test_zero_timeout_means_none(pfs):
    pfs.lock("z0 0")
    time.sleep(0.3)             # no expiry in a window of 0.3 s
    assert pfs.active() == [b"z0"]
    assert pfs.source("z0").expire_count == 0
    pfs.unlock("z0")


def test_lock_without_timeout_cancels_timeout(pfs):
    pfs.lock(b"cx %d" % (200 * MS))
    pfs.lock(b"cx")
    time.sleep(0.5)             # no expiry in a window of 0.5 s (> 200 ms)
    assert pfs.active() == [b"cx"]
    assert pfs.source("cx").expire_count == 0
    pfs.unlock("cx")


def test_shorter_timeout_does_not_shorten(pfs):
    t0 = time.monotonic()
    pfs.lock(b"sh %d" % (700 * MS))
    pfs.lock(b"sh 1")
    time.sleep(0.3)             # no expiry in a window of 0.3 s
    assert pfs.active() == [b"sh"], "a 1 ns timeout cut a 700 ms one short"
    assert wait_until(lambda: pfs.active() == [], timeout=5)
    assert time.monotonic() - t0 >= 0.6
    s = pfs.source("sh")
    assert (s.active_count, s.event_count, s.expire_count) == (1, 2, 1)


def test_longer_timeout_extends(pfs):
    t0 = time.monotonic()
    pfs.lock(b"lg %d" % (200 * MS))
    pfs.lock(b"lg %d" % (700 * MS))
    time.sleep(0.45)            # no expiry in a window of 0.45 s (> 200 ms)
    assert pfs.active() == [b"lg"]
    assert wait_until(lambda: pfs.active() == [], timeout=5)
    assert time.monotonic() - t0 >= 0.6
    assert pfs.source("lg").expire_count == 1


def test_timeout_on_a_held_lock_arms_a_timer(pfs):
    pfs.lock(b"tp")
    pfs.lock(b"tp %d" % MS)
    assert wait_until(lambda: pfs.active() == [], timeout=5)
    assert pfs.source("tp").expire_count == 1


@pytest.mark.parametrize("ns", [18446744073709551615, 18446744073708551617,
                                4294967296 * MS, 4294967295 * MS + 1])
def test_huge_timeouts_are_capped_not_wrapped(pfs, ns):
    pfs.lock(b"huge %d" % ns)
    time.sleep(0.3)             # no expiry in a window of 0.3 s
    try:
        assert pfs.active() == [b"huge"]
    finally:
        pfs.unlock("huge")


def test_locks_are_not_reference_counted(pfs):
    pfs.lock("rc", "rc", "rc")
    pfs.unlock("rc")
    assert pfs.active() == []
    s = pfs.source("rc")
    assert (s.active_count, s.event_count) == (1, 3)


# --- listings -------------------------------------------------------------------------

def test_listings_when_empty(mount):
    p = mount()
    assert p.read("wake_lock") == b"\n"
    assert p.read("wake_unlock") == b"\n"


def test_listings_sorted_by_byte_value(mount):
    p = mount()
    names = [b"b", b"a", b"B", b"_", b"\xc3\xa9", b"a0", b"Z9", b"0", b"~"]
    p.lock(*names)
    assert p.read("wake_lock") == b" ".join(sorted(names)) + b"\n"
    assert p.read("wake_unlock") == b"\n"
    p.unlock(b"a0", b"b", b"\xc3\xa9")
    assert p.read("wake_lock") == b"0 B Z9 _ a ~\n"
    assert p.read("wake_unlock") == b"a0 b \xc3\xa9\n"
    p.unlock(*names)
    assert p.read("wake_lock") == b"\n"
    assert p.read("wake_unlock") == b" ".join(sorted(names)) + b"\n"


@pytest.mark.parametrize("size,shown", [(4094, 4094), (4095, 4094),
                                        (4096, 4094)])
def test_listing_of_one_long_name(mount, size, shown):
    p = mount()
    name = bytes(65 + i % 26 for i in range(size))
    p.lock(name)
    assert p.read("wake_lock") == name[:shown] + b"\n"
    p.unlock(name)
    assert p.read("wake_unlock") == name[:shown] + b"\n"


def test_listing_is_cut_at_4095_bytes(mount):
    p = mount()
    names = [b"a" * 2000, b"b" * 2000, b"c" * 100, b"d" * 10]
    p.lock(*names)
    full = b"".join(n + b" " for n in names)
    # The kernel fills 4095 bytes with "name " entries, drops the last one
    # written, and appends "\n".
    expected = full[:4094] + b"\n"
    assert len(expected) == 4095
    assert p.read("wake_lock") == expected
    p.unlock(*names)
    assert p.read("wake_unlock") == expected


# --- the limit ----------------------------------------------------------------------------

def test_limit_default_is_100(mount):
    p = mount()
    names = [b"l%03d" % i for i in range(100)]
    p.lock(*names)
    with raises_errno(errno.ENOSPC):
        p.write("wake_lock", b"l100")
    p.lock(b"l050", b"l000 %d" % (60000 * MS))    # existing ones: fine
    # Inactive sources still exist and count.
    p.unlock(*names)
    with raises_errno(errno.ENOSPC):
        p.write("wake_lock", b"l100\n")
    with raises_errno(errno.EINVAL):
        p.write("wake_unlock", b"l100")
    assert len(p.inactive()) == 100


def test_limit_option(mount):
    p = mount("--wakelock-limit=3")
    p.lock("a", "b", "c")
    with raises_errno(errno.ENOSPC):
        p.write("wake_lock", b"d")
    p.lock("a")
    assert p.read("wake_lock") == b"a b c\n"
    p.unlock("a", "b", "c")


def test_limit_ignores_the_autosleep_source(mount):
    p = mount("--wakelock-limit=2")
    assert p.write("autosleep", b"off") == 3
    p.lock("a", "b")
    with raises_errno(errno.ENOSPC):
        p.write("wake_lock", b"c")


def test_limit_zero_is_unlimited(mount):
    p = mount("--wakelock-limit=0")
    names = [b"u%03d" % i for i in range(150)]
    p.lock(*names)
    assert p.active() == names
    p.unlock(*names)
    assert p.inactive() == names


# --- wake_unlock ----------------------------------------------------------------------------

def test_unlock_strips_one_newline(pfs):
    pfs.lock("un1")
    assert pfs.write("wake_unlock", b"un1\n") == 4
    assert pfs.active() == []
    pfs.lock("un1")
    with raises_errno(errno.EINVAL):
        pfs.write("wake_unlock", b"un1\n\n")
    assert pfs.active() == [b"un1"]
    pfs.unlock("un1")


@pytest.mark.parametrize("cmd", [b"un2 100", b"un2 ", b" un2", b"un2\r\n",
                                 b"un2\t", b"un2 100\n"], ids=repr)
def test_unlock_name_is_taken_literally(pfs, cmd):
    pfs.lock("un2")
    try:
        with raises_errno(errno.EINVAL):
            pfs.write("wake_unlock", cmd)
        assert pfs.active() == [b"un2"]
    finally:
        pfs.unlock("un2")


@pytest.mark.parametrize("cmd", [b"\n", b"never_locked", b"never_locked\n"],
                         ids=repr)
def test_unlock_empty_or_unknown(pfs, cmd):
    before = list(pfs.sources())
    n = pfs.count()
    with raises_errno(errno.EINVAL):
        pfs.write("wake_unlock", cmd)
    assert list(pfs.sources()) == before
    assert pfs.count() == n


def test_unlock_of_inactive_lock_succeeds_and_changes_nothing(pfs):
    pfs.lock("un3")
    pfs.unlock("un3")
    n = pfs.count()
    s = pfs.source("un3")
    assert pfs.write("wake_unlock", b"un3") == 3
    assert pfs.write("wake_unlock", b"un3\n") == 4
    assert pfs.count() == n
    s2 = pfs.source("un3")
    assert s2[:5] == s[:5] and s2.total_time == s.total_time


def test_unlock_listing(mount):
    p = mount()
    p.lock("b", "a", "c")
    p.unlock("c", "a")
    assert p.read("wake_unlock") == b"a c\n"
    assert p.read("wake_lock") == b"b\n"
    p.unlock("b")
    assert p.read("wake_unlock") == b"a b c\n"
    assert p.read("wake_lock") == b"\n"


# --- garbage collection --------------------------------------------------------------------

def test_gc_collects_inactive_locks(mount):
    p = mount("--wakelock-gc-seconds=0", "--wakelock-limit=4")
    p.lock("keep", "a", "b", "c")
    p.lock("a")
    with raises_errno(errno.ENOSPC):
        p.write("wake_lock", b"d")
    assert p.source("deleted")[:4] == (0, 0, 0, 0)
    p.unlock("a", "b", "c")
    for _ in range(97):
        p.unlock("a")
    # 100 successful unlocks: no collection yet (one runs inside the
    # unlock write that starts it, so there is nothing to wait for).
    assert p.read("wake_unlock") == b"a b c\n"
    p.unlock("a")     # the 101st
    assert wait_until(lambda: p.read("wake_unlock") == b"\n"), \
        "101 unlocks did not collect the inactive locks"
    assert p.read("wake_lock") == b"keep\n"
    rows = p.sources()
    assert list(rows) == [b"keep", b"autosleep", b"deleted"]
    d = rows[b"deleted"]
    assert (d.active_count, d.event_count, d.expire_count) == (3, 4, 0)
    with raises_errno(errno.EINVAL):
        p.write("wake_unlock", b"a")
    # Their places under the limit are free again.
    p.lock("d", "e", "f")
    with raises_errno(errno.ENOSPC):
        p.write("wake_lock", b"g")
    p.unlock("keep", "d", "e", "f")


def test_gc_keeps_recently_used_locks(mount):
    p = mount("--wakelock-limit=4")     # default idle time 300 s
    p.lock("a", "b")
    for _ in range(101):
        p.unlock("a")           # the 101st collects, inside the write
    assert p.read("wake_unlock") == b"a\n"
    assert p.read("wake_lock") == b"b\n"
    assert list(p.sources()) == [b"b", b"a", b"autosleep", b"deleted"]


def test_gc_stops_at_recently_used_locks(mount):
    p = mount("--wakelock-gc-seconds=1")
    p.lock("k")                   # old but active: skipped
    p.lock("a", "b")
    p.unlock("a", "b")
    time.sleep(1.3)             # a and b age past the GC time, on purpose
    p.lock("c")
    for _ in range(99):           # unlocks 3 .. 101
        p.unlock("c")
    assert wait_until(lambda: p.read("wake_unlock") == b"c\n"), \
        p.read("wake_unlock")
    assert p.read("wake_lock") == b"k\n"
    assert list(p.sources()) == [b"c", b"k", b"autosleep", b"deleted"]
    p.unlock("k")
