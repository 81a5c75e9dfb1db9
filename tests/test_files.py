"""General file semantics (SPEC.md "General file semantics (sysfs)"):
attributes, directory listings, the read snapshot rules, the write rules,
and the refusal to create, remove or rename entries."""

import errno
import os
import stat
import subprocess

import pytest

from conftest import (CAP_BLOCK_SUSPEND, ROOT_ENTRIES, ROOT_FILES, STATS_FILES,
                      Reader, open_close, open_write_close, raises_errno,
                      run_in_child, timed, wait_until)

CAP_DAC_OVERRIDE = 1

RO_FILES = ["suspend_stats/" + n for n in STATS_FILES]


# --- attributes and listings ---------------------------------------------------

def test_root_is_a_0755_directory(pfs):
    st = os.stat(pfs.path())
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o755


@pytest.mark.parametrize("name", ROOT_FILES)
def test_regular_file_attributes(pfs, name):
    st = os.stat(pfs.path(name))
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o644
    assert (st.st_uid, st.st_gid) == (0, 0)
    assert st.st_size == 4096


def test_fstat_matches_stat(pfs):
    fd = os.open(pfs.path("wake_lock"), os.O_RDONLY)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644
    assert st.st_size == 4096


def test_wakeup_sources_attributes(pfs):
    """0444 root, and (deviation) a size that bounds the content, where
    debugfs says 0: on a FUSE file of size 0, sendfile (busybox cat) would
    return end of file without asking powerfs, which refuses it."""
    st = os.stat(pfs.path("wakeup_sources"))
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o444
    assert (st.st_uid, st.st_gid) == (0, 0)
    assert st.st_size % 4096 == 0
    assert st.st_size >= len(pfs.read_all("wakeup_sources")) + 4096


def test_wakeup_sources_size_follows_the_sources(mount):
    p = mount("--wakelock-limit=0")
    os.stat(p.path("wakeup_sources"))    # the kernel has its attributes
    names = [b"n%04d-" % i + b"x" * 200 for i in range(200)]
    for n in names:
        p.lock(n)
    assert os.stat(p.path("wakeup_sources")).st_size > 40000
    data = p.read_all("wakeup_sources")
    assert len(data) > 40000
    assert os.stat(p.path("wakeup_sources")).st_size >= len(data) + 4096
    for n in names:
        p.unlock(n)


def test_wakeup_sources_root_may_open_for_writing(pfs):
    """debugfs: the file has no write handler; its 0444 mode keeps others
    out, root opens it for writing and every write fails with EINVAL."""
    before = pfs.read_all("wakeup_sources")
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND,
                  os.O_WRONLY | os.O_TRUNC):
        fd = os.open(pfs.path("wakeup_sources"), flags)
        try:
            for data in (b"x", b"autosleep\n", b"x" * 5000):
                with raises_errno(errno.EINVAL):
                    os.write(fd, data)
        finally:
            os.close(fd)
    with raises_errno(errno.EACCES):
        run_in_child(open_close, pfs.path("wakeup_sources"), os.O_WRONLY,
                     drop_caps=[CAP_DAC_OVERRIDE])
    assert pfs.read_all("wakeup_sources").split(b"\n")[0] == \
        before.split(b"\n")[0]


def test_suspend_stats_is_a_0755_directory(pfs):
    st = os.stat(pfs.path("suspend_stats"))
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o755


@pytest.mark.parametrize("name", STATS_FILES)
def test_suspend_stats_file_attributes(pfs, name):
    st = os.stat(pfs.path("suspend_stats/" + name))
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o444
    assert (st.st_uid, st.st_gid) == (0, 0)
    assert st.st_size == 4096


def test_readdir_root(pfs):
    assert sorted(os.listdir(pfs.path())) == sorted(ROOT_ENTRIES)
    kinds = {e.name: e.is_dir(follow_symlinks=False)
             for e in os.scandir(pfs.path())}
    assert kinds == {n: n == "suspend_stats" for n in ROOT_ENTRIES}


def test_readdir_suspend_stats(pfs):
    assert sorted(os.listdir(pfs.path("suspend_stats"))) == sorted(STATS_FILES)
    assert all(e.is_file(follow_symlinks=False)
               for e in os.scandir(pfs.path("suspend_stats")))


@pytest.mark.parametrize("name", ["wait_for_fb_sleep", "wait_for_fb_wake",
                                  "nosuchfile", "suspend_stats/nosuch"])
def test_absent_files(pfs, name):
    with raises_errno(errno.ENOENT):
        os.stat(pfs.path(name))
    with raises_errno(errno.ENOENT):
        os.open(pfs.path(name), os.O_RDONLY)


# --- read rules -------------------------------------------------------------------

def test_read_regenerates_at_offset_zero(pfs):
    fd = os.open(pfs.path("wake_lock"), os.O_RDONLY)
    try:
        assert os.read(fd, 8192) == b"\n"
        pfs.lock("rz_a")
        os.lseek(fd, 0, os.SEEK_SET)
        assert os.read(fd, 8192) == b"rz_a\n"
        pfs.unlock("rz_a")
        assert os.pread(fd, 8192, 0) == b"\n"
    finally:
        os.close(fd)


def test_continued_reads_come_from_the_snapshot(pfs):
    pfs.lock("snap_abc")
    fd = os.open(pfs.path("wake_lock"), os.O_RDONLY)
    try:
        got = os.read(fd, 1)
        assert got == b"s"
        pfs.unlock("snap_abc")
        pfs.lock("snap_zzz")
        while True:
            c = os.read(fd, 1)
            if not c:
                break
            got += c
        assert got == b"snap_abc\n"
        assert os.read(fd, 8192) == b""
        os.lseek(fd, 0, os.SEEK_SET)
        assert os.read(fd, 8192) == b"snap_zzz\n"
    finally:
        os.close(fd)
        pfs.unlock("snap_zzz")


def test_read_at_end_returns_nothing_at_once(pfs):
    n = pfs.count()
    fd = os.open(pfs.path("wakeup_count"), os.O_RDONLY)
    try:
        assert os.read(fd, 8192) == b"%d\n" % n
        pfs.lock("atend")
        try:
            # At the end of the snapshot: 0 at once, even on wakeup_count
            # with a lock held.
            assert timed(os.read, fd, 8192, timeout=3) == b""
            assert timed(os.read, fd, 8192, timeout=3) == b""
        finally:
            pfs.unlock("atend")
    finally:
        os.close(fd)


def test_single_read_returns_everything(mount):
    p = mount()
    names = sorted(b"%02d" % i + b"x" * 98 for i in range(30))
    p.lock(*names)
    expected = b" ".join(names) + b"\n"
    assert len(expected) == 3030
    fd = os.open(p.path("wake_lock"), os.O_RDONLY)
    try:
        assert os.read(fd, 8192) == expected
        assert os.read(fd, 8192) == b""
    finally:
        os.close(fd)


def test_pread_without_snapshot_regenerates(pfs):
    pfs.lock("pr_abcdef")
    fd = os.open(pfs.path("wake_lock"), os.O_RDONLY)
    try:
        # A fresh fd read at offset 3: generated now, served from 3.
        assert os.pread(fd, 4, 3) == b"abcd"
        pfs.unlock("pr_abcdef")
        pfs.lock("pr_uvwxyz")
        # Continuing where the previous read ended: the old snapshot.
        assert os.pread(fd, 8192, 7) == b"ef\n"
        # Elsewhere: generated again.
        assert os.pread(fd, 8192, 2) == b"_uvwxyz\n"
        os.lseek(fd, 5, os.SEEK_SET)
        assert os.read(fd, 8192) == b"wxyz\n"
        assert os.pread(fd, 100, 5000) == b""
    finally:
        os.close(fd)
        pfs.unlock("pr_uvwxyz")


def test_no_stale_page_cache(pfs):
    fd1 = os.open(pfs.path("wake_lock"), os.O_RDONLY)
    fd2 = os.open(pfs.path("wake_lock"), os.O_RDONLY)
    try:
        assert os.read(fd1, 8192) == b"\n"
        pfs.lock("pc_x")
        assert os.read(fd2, 8192) == b"pc_x\n"
        assert pfs.read("wake_lock") == b"pc_x\n"
        pfs.unlock("pc_x")
        os.lseek(fd1, 0, os.SEEK_SET)
        assert os.read(fd1, 8192) == b"\n"
        os.lseek(fd2, 0, os.SEEK_SET)
        assert os.read(fd2, 8192) == b"\n"
        assert pfs.read("wake_lock") == b"\n"
        assert pfs.read("wake_unlock").split().count(b"pc_x") == 1
    finally:
        os.close(fd1)
        os.close(fd2)


def test_o_nonblock_changes_nothing(pfs):
    fd = os.open(pfs.path("wake_lock"), os.O_WRONLY | os.O_NONBLOCK)
    try:
        assert os.write(fd, b"nb_a") == 4
    finally:
        os.close(fd)
    fd = os.open(pfs.path("wake_lock"), os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert os.read(fd, 8192) == b"nb_a\n"
    finally:
        os.close(fd)
    pfs.unlock("nb_a")
    n = pfs.count()
    pfs.lock("nb_a")
    try:
        with Reader(pfs.path("wakeup_count"), nonblock=True) as r:
            r.wait_in_read()
            assert r.blocked(0.3), "O_NONBLOCK read of wakeup_count " \
                "returned while a lock was held: %r" % (r.result(),)
            pfs.unlock("nb_a")
            assert r.result() == (len(b"%d\n" % (n + 1)), 0, b"%d\n" % (n + 1))
    finally:
        pfs.unlock("nb_a")


# --- write rules ------------------------------------------------------------------

def test_each_write_is_one_command_at_any_offset(pfs):
    fd = os.open(pfs.path("wake_lock"), os.O_WRONLY)
    try:
        assert os.write(fd, b"wc_a") == 4
        assert os.write(fd, b"wc_b\n") == 5
        os.lseek(fd, 123456, os.SEEK_SET)
        assert os.write(fd, b"wc_c") == 4
    finally:
        os.close(fd)
    assert pfs.read("wake_lock") == b"wc_a wc_b wc_c\n"
    fd = os.open(pfs.path("wake_unlock"), os.O_WRONLY)
    try:
        assert os.write(fd, b"wc_a\n") == 5
        assert os.write(fd, b"wc_b") == 4
        assert os.pwrite(fd, b"wc_c", 77) == 4
    finally:
        os.close(fd)
    assert pfs.read("wake_lock") == b"\n"


def test_read_write_on_one_rdwr_fd(pfs):
    fd = os.open(pfs.path("wake_lock"), os.O_RDWR)
    try:
        assert os.read(fd, 8192) == b"\n"
        assert os.write(fd, b"rw_a") == 4
        assert os.pread(fd, 8192, 0) == b"rw_a\n"
    finally:
        os.close(fd)
        pfs.unlock("rw_a")


def test_o_trunc_o_append_and_shell_redirections(pfs):
    path = pfs.path("wake_lock")
    assert pfs.write("wake_lock", b"tr_a\n", os.O_WRONLY | os.O_TRUNC) == 5
    assert pfs.write("wake_lock", b"tr_b\n", os.O_WRONLY | os.O_APPEND) == 5
    assert pfs.write("wake_lock", b"tr_c\n",
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC) == 5
    assert pfs.read("wake_lock") == b"tr_a tr_b tr_c\n"
    unlock = pfs.path("wake_unlock")
    r = subprocess.run(["sh", "-c", 'echo tr_a > "$1" && echo tr_b >> "$1" '
                        '&& printf tr_c > "$1" && echo tr_d > "$2"',
                        "sh", unlock, path], capture_output=True, timeout=10)
    assert r.returncode == 0, r.stderr
    assert pfs.read("wake_lock") == b"tr_d\n"
    pfs.unlock("tr_d")


def test_truncate_to_zero_is_accepted_and_ignored(pfs):
    pfs.lock("tz_a")
    try:
        os.truncate(pfs.path("wake_lock"), 0)
        fd = os.open(pfs.path("wake_lock"), os.O_WRONLY)
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        os.truncate(pfs.path("state"), 0)
        assert pfs.read("wake_lock") == b"tz_a\n"
        assert os.stat(pfs.path("wake_lock")).st_size == 4096
    finally:
        pfs.unlock("tz_a")


def test_write_longer_than_4096_is_cut(mount):
    p = mount()
    name = bytes(97 + i % 26 for i in range(5000))
    fd = os.open(p.path("wake_lock"), os.O_WRONLY)
    try:
        assert os.write(fd, name) == 4096
    finally:
        os.close(fd)
    # The name is the first 4096 bytes; the listing shows 4094 of them.
    assert p.read("wake_lock") == name[:4094] + b"\n"
    with raises_errno(errno.EINVAL):
        p.write("wake_unlock", name[:4095])
    assert p.write("wake_unlock", name[:4096]) == 4096
    assert p.read("wake_lock") == b"\n"
    assert p.read("wake_unlock") == name[:4094] + b"\n"


def test_write_of_4096_bytes_is_taken_whole(pfs):
    # Only the last byte makes the timeout 5 ns instead of 0 (= none).
    cmd = b"w4k " + b"0" * 4091 + b"5"
    assert len(cmd) == 4096
    before = pfs.sources().get(b"w4k")
    assert pfs.write("wake_lock", cmd) == 4096
    assert wait_until(lambda: b"w4k" not in pfs.active()), \
        "lock with a 5 ns timeout never expired: the last byte was lost"
    after = pfs.source("w4k")
    assert after.expire_count == (before.expire_count if before else 0) + 1


def test_zero_length_write_does_nothing(pfs):
    n = pfs.count()
    ok = pfs.stat("success")
    for name in ROOT_FILES:
        assert pfs.write(name, b"") == 0
    # ... not even a permission check on wake_lock / wake_unlock.
    for name in ("wake_lock", "wake_unlock"):
        assert run_in_child(open_write_close, pfs.path(name), b"",
                            drop_caps=[CAP_BLOCK_SUSPEND]) == 0
    assert pfs.count() == n
    assert pfs.stat("success") == ok
    assert pfs.read("autosleep") == b"off\n"
    assert pfs.read("wake_lock") == b"\n"


@pytest.mark.parametrize("flags", [os.O_WRONLY, os.O_RDWR],
                         ids=["O_WRONLY", "O_RDWR"])
@pytest.mark.parametrize("name", RO_FILES)
def test_read_only_files_refuse_write_open(pfs, name, flags):
    with raises_errno(errno.EACCES):
        os.open(pfs.path(name), flags)
    os.close(os.open(pfs.path(name), os.O_RDONLY))


@pytest.mark.parametrize("flags", [os.O_WRONLY | os.O_TRUNC,
                                   os.O_WRONLY | os.O_APPEND,
                                   os.O_WRONLY | os.O_CREAT],
                         ids=["TRUNC", "APPEND", "CREAT"])
@pytest.mark.parametrize("name", ["suspend_stats/success"])
def test_read_only_files_refuse_write_open_any_flags(pfs, name, flags):
    with raises_errno(errno.EACCES):
        os.open(pfs.path(name), flags)


# --- the namespace is fixed -----------------------------------------------------------

@pytest.mark.parametrize("name", ["newfile", "suspend_stats/newfile"])
def test_create_is_refused(pfs, name):
    with raises_errno(errno.EACCES):
        os.open(pfs.path(name), os.O_WRONLY | os.O_CREAT, 0o644)
    with raises_errno(errno.EACCES):
        os.open(pfs.path(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    assert not os.path.exists(pfs.path(name))


@pytest.mark.parametrize("name", ["wake_lock", "wakeup_sources",
                                  "suspend_stats/success"])
def test_unlink_is_refused(pfs, name):
    with raises_errno(errno.EPERM):
        os.unlink(pfs.path(name))
    assert os.path.exists(pfs.path(name))


@pytest.mark.parametrize("name", ["newdir", "suspend_stats/newdir"])
def test_mkdir_is_refused(pfs, name):
    with raises_errno(errno.EPERM):
        os.mkdir(pfs.path(name))
    assert not os.path.exists(pfs.path(name))


@pytest.mark.parametrize("src,dst", [("wake_lock", "renamed"),
                                     ("wake_lock", "wake_unlock"),
                                     ("suspend_stats/success", "success"),
                                     ("suspend_stats", "stats")])
def test_rename_is_refused(pfs, src, dst):
    with raises_errno(errno.EPERM):
        os.rename(pfs.path(src), pfs.path(dst))
    assert os.path.exists(pfs.path(src))
    assert sorted(os.listdir(pfs.path())) == sorted(ROOT_ENTRIES)


def test_symlink_is_refused(pfs):
    with raises_errno(errno.EPERM):
        os.symlink("wake_lock", pfs.path("link"))
    assert not os.path.lexists(pfs.path("link"))


def test_rmdir_and_link_fail(pfs):
    with pytest.raises(OSError):
        os.rmdir(pfs.path("suspend_stats"))
    with pytest.raises(OSError):
        os.link(pfs.path("wake_lock"), pfs.path("hardlink"))
    assert sorted(os.listdir(pfs.path())) == sorted(ROOT_ENTRIES)
    assert sorted(os.listdir(pfs.path("suspend_stats"))) == sorted(STATS_FILES)
