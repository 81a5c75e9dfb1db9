"""wakeup_sources (SPEC.md): the exact table format and the statistics."""

import os
import re
import time

from conftest import SOURCES_HEADER, wait_until

ROW = re.compile(rb"(?P<pad>[^\t]*)\t(?P<n>\d+)\t\t(\d+)\t\t(\d+)\t\t(\d+)"
                 rb"\t\t(-?\d+)\t\t(-?\d+)\t\t(-?\d+)\t\t(-?\d+)\t\t(-?\d+)")


def rows(data):
    assert data.startswith(SOURCES_HEADER)
    body = data[len(SOURCES_HEADER):]
    assert body.endswith(b"\n")
    return body[:-1].split(b"\n")


def test_header_is_exact(mount):
    p = mount()
    data = p.read_all("wakeup_sources")
    assert data[:len(SOURCES_HEADER)] == SOURCES_HEADER


def test_initial_rows(mount):
    p = mount()
    src = p.sources()
    assert list(src) == [b"autosleep", b"deleted"]
    for name in (b"autosleep", b"deleted"):
        s = src[name]
        assert (s.active_count, s.event_count, s.wakeup_count, s.expire_count,
                s.active_since, s.total_time, s.max_time,
                s.prevent_suspend_time) == (0,) * 8, (name, s)


def test_row_format_is_exact(mount):
    p = mount()
    names = [b"a", b"exactly12chr", b"thirteen_char", b"a_much_longer_name_x",
             b"\xc3\xa9"]
    p.lock(*names)
    p.unlock(b"a")
    lines = rows(p.read_all("wakeup_sources"))
    expected = list(reversed(names)) + [b"autosleep", b"deleted"]
    assert len(lines) == len(expected)
    for line, name in zip(lines, expected):
        m = ROW.fullmatch(line)
        assert m, f"row does not match %-12s\\t%lu\\t\\t...: {line!r}"
        # Padded with spaces to 12 bytes, never cut, then exactly one tab.
        assert m.group("pad") == name.ljust(12), line


def test_rows_newest_first_deleted_last(mount):
    p = mount()
    p.lock("c", "a", "b")
    p.lock("c")                 # using an old source does not move it
    p.unlock("c")
    assert list(p.sources()) == [b"b", b"a", b"c", b"autosleep", b"deleted"]


def test_active_and_event_counts(mount):
    p = mount()
    p.lock("x")
    s = p.source("x")
    assert (s.active_count, s.event_count, s.wakeup_count, s.expire_count) \
        == (1, 1, 0, 0)
    p.lock("x")
    s = p.source("x")
    assert (s.active_count, s.event_count) == (1, 2)
    p.unlock("x")
    assert p.read("wake_lock") == b"\n"
    s = p.source("x")
    assert (s.active_count, s.event_count, s.active_since) == (1, 2, 0)
    p.lock("x")
    p.unlock("x")
    s = p.source("x")
    assert (s.active_count, s.event_count) == (2, 3)


def test_times(mount):
    p = mount()
    t0 = time.monotonic() * 1000
    p.lock("tm")
    t1 = time.monotonic() * 1000
    time.sleep(0.3)             # held 0.3 s, on purpose
    s = p.source("tm")
    assert s.active_since >= 250
    assert s.total_time >= s.active_since
    assert s.max_time >= s.active_since
    assert t0 - 20 <= s.last_change <= t1 + 20, \
        f"last_change {s.last_change} is not CLOCK_MONOTONIC ms ({t0:.0f})"
    t2 = time.monotonic() * 1000
    p.unlock("tm")
    t3 = time.monotonic() * 1000
    s = p.source("tm")
    assert s.active_since == 0
    assert s.total_time >= 250
    assert s.max_time == s.total_time
    assert t2 - 20 <= s.last_change <= t3 + 20
    first = s.total_time
    p.lock("tm")
    time.sleep(0.1)             # held 0.1 s, on purpose
    p.unlock("tm")
    s = p.source("tm")
    assert s.total_time >= first + 80
    assert s.max_time == first


def test_expire_count(mount):
    p = mount()
    p.lock(b"ex 1000000")
    assert wait_until(lambda: p.read("wake_lock") == b"\n")
    s = p.source("ex")
    assert (s.active_count, s.event_count, s.expire_count, s.active_since) \
        == (1, 1, 1, 0)


def test_prevent_suspend_time_zero_without_autosleep(mount):
    p = mount()
    p.lock("np")
    time.sleep(0.2)             # held 0.2 s without autosleep, on purpose
    assert p.source("np").prevent_suspend_time == 0
    p.unlock("np")
    assert p.source("np").prevent_suspend_time == 0


def test_a_read_returns_about_a_page_of_whole_rows(mount):
    """As the kernel's seq_file reads it (the oracle kernel returned 4065
    bytes to a first read of 1 MiB, 128 KiB, 8192 or 5000 bytes with 100
    sources): a read(2) gets the header and the whole rows that fit below
    4096 bytes, the next read goes on from the next row, and a read smaller
    than a row ends inside it."""
    p = mount("--wakelock-limit=0")
    names = [b"NetworkStats.wakeup.%d" % i for i in range(300)]
    p.lock(*names)
    p.unlock(*names)           # inactive sources: the listing holds still
    full = p.read_all("wakeup_sources")
    lines = full.splitlines(keepends=True)

    def fit(start):
        """The end of a buffer of whole rows filled from row start."""
        end, used = start, 0
        while used + len(lines[end]) < 4096:
            used += len(lines[end])
            end += 1
        return end
    fd = os.open(p.path("wakeup_sources"), os.O_RDONLY)
    try:
        first = os.read(fd, 1 << 20)
        assert first == b"".join(lines[:fit(0)])
        second = os.read(fd, 1 << 20)
        assert second == full[len(first):len(first) + len(second)]
        assert len(second) < 4096 and second.endswith(b"\n")
        assert len(second) + len(full[len(first) + len(second):].split(b"\n")[0]) + 1 >= 4096
        os.lseek(fd, 0, os.SEEK_SET)
        assert os.read(fd, 10) == full[:10]
        # The rest of the header, then a fresh buffer from the next row.
        assert os.read(fd, 1 << 20) == (lines[0][10:] +
                                        b"".join(lines[1:fit(1)]))
        got = bytearray(b"".join(lines[:fit(1)]))
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            got += b
        assert bytes(got) == full
    finally:
        os.close(fd)
