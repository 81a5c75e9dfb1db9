"""--state-file: held wake locks, settings, owners and statistics survive a
restart; a corrupt file is reported and ignored."""

import errno
import os
import shutil
import signal
import time

import conftest
from conftest import wait_until


def finish(inst):
    """Unmount now (exit status 0 and a clean log checked); the fixture's
    teardown then has nothing left to do for it."""
    inst.stop()
    inst.stop = lambda: None


def restart(mount, old, *args):
    finish(old)
    return mount(*args)


def test_restart_keeps_locks_settings_owners_and_stats(mount, tmp_path):
    state = tmp_path / "state"
    a = mount(f"--state-file={state}", "--simulate-sleep-ms=10")
    a.lock("idle")
    a.unlock("idle")
    c = a.count()
    assert a.write("wakeup_count", b"%d" % c) == len(str(c))
    assert a.write("state", b"mem") == 3
    a.lock("held")
    a.write("wake_lock", b"timed 60000000000")       # 60 s timeout
    os.chown(a.path("wake_lock"), 1001, 3010)
    os.chmod(a.path("wake_lock"), 0o660)
    before = a.sources()
    time.sleep(0.3)         # held 0.3 s more, on purpose: the times grow
    b = restart(mount, a, f"--state-file={state}")
    assert b.active() == [b"held", b"timed"]
    assert b.inactive() == [b"idle"]
    st = os.stat(b.path("wake_lock"))
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1001, 3010, 0o660)
    assert b.read("suspend_stats/success") == b"1\n"
    after = b.sources()
    for name in (b"held", b"idle", b"timed", b"autosleep"):
        for field in ("active_count", "event_count", "wakeup_count",
                      "expire_count"):
            assert getattr(after[name], field) == \
                getattr(before[name], field), (name, field)
        assert after[name].total_time >= before[name].total_time
    b.unlock("held", "timed")
    # The registered count went on from where it was.
    assert b.count() == c + 2


def test_remaining_timeout_is_kept(mount, tmp_path):
    state = tmp_path / "state"
    a = mount(f"--state-file={state}")
    a.write("wake_lock", b"short 1500000000")         # 1.5 s
    time.sleep(0.5)                 # a third of it passes, on purpose
    b = restart(mount, a, f"--state-file={state}")
    assert b.active() == [b"short"]
    # About 1 s was left: it expires on time, not 1.5 s after the restart.
    assert wait_until(lambda: b.active() == [], timeout=1.4)
    assert b.sources()[b"short"].expire_count == 1


def test_registered_count_and_autosleep_survive(mount, tmp_path):
    state = tmp_path / "state"
    a = mount(f"--state-file={state}", "--simulate-sleep-ms=50")
    for i in range(5):
        a.lock("x")
        a.unlock("x")
    a.lock("x")                          # keep autosleep from suspending
    a.write("autosleep", b"mem")
    a.unlock("x")
    a.lock("x")
    n = a.sources()[b"x"].active_count
    b = restart(mount, a, f"--state-file={state}", "--simulate-sleep-ms=50")
    assert b.read("autosleep") == b"mem\n"
    assert b.sources()[b"x"].active_count == n
    b.write("autosleep", b"off")
    b.unlock("x")
    count = int(b.read("wakeup_count"))
    assert count >= 5 + 1 + 1 + 1


def test_saved_soon_after_a_change_and_atomically(mount, tmp_path):
    state = tmp_path / "state"
    a = mount(f"--state-file={state}")
    a.lock("soon")
    assert wait_until(lambda: b"lock 736f6f6e" in state.read_bytes(), 1.0)
    assert sorted(os.listdir(tmp_path)) == ["state"]   # no temp files left
    assert os.stat(state).st_mode & 0o777 == 0o600
    a.unlock("soon")


def test_the_last_lock_before_sigterm_is_in_the_file(mount, tmp_path):
    """A lock acknowledged right before SIGTERM is in the file once powerfs
    has stopped: its line was stored before the write returned, and the
    clean end cuts the file's padding without losing it.  (There is no
    window in which a change waits to be written.)"""
    state = tmp_path / "state"
    a = mount(f"--state-file={state}")
    a.lock("first")
    a.lock("last")
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(5) == 0
    assert not os.path.ismount(a.mnt)
    assert b"lock 6c617374" in state.read_bytes()
    conftest._live.discard(a)
    a.stop = lambda: shutil.rmtree(a.tmpdir, ignore_errors=True)


def test_corrupt_file_is_reported_and_ignored(mount, tmp_path):
    state = tmp_path / "state"
    for junk in (b"\x00\xff garbage [[[", b"[powerfs]\nformat=1\nregist",
                 b"powerfs-state 9 x\n", b""):
        state.write_bytes(junk)
        pfs = mount(f"--state-file={state}")
        assert pfs.read("wake_lock") == b"\n"
        assert pfs.read("autosleep") == b"off\n"
        assert "starting clean" in pfs.log()
        pfs.lock("fresh")
        pfs.unlock("fresh")
        finish(pfs)
    assert state.read_bytes().startswith(b"powerfs-state 2 ")


def test_missing_file_starts_clean(mount, tmp_path):
    pfs = mount(f"--state-file={tmp_path}/new")
    assert pfs.read("wake_lock") == b"\n"
    assert wait_until(lambda: os.path.exists(tmp_path / "new"))


_LOCKER = r'''
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
i = 0
while True:
    try:
        os.write(fd, b"ack%06d" % i)
    except OSError:
        break
    print(i, flush=True)
    i += 1
'''


def test_locks_acknowledged_during_sigterm_are_saved(tmp_path):
    """Every wake_lock write that returned before powerfs exited is in the
    state file: shutdown stops taking requests on both mounts before it
    saves (with two mounts, the old order served one while unmounting the
    other, after the save)."""
    state = tmp_path / "state"
    cw = tmp_path / "cw"
    cw.mkdir()
    p = conftest.Powerfs(f"--state-file={state}", "--wakelock-limit=0",
                         f"--class-wakeup={cw}").start()
    try:
        w = conftest.subprocess.Popen(
            [conftest.PYTHON, "-c", _LOCKER, p.path("wake_lock")],
            stdout=conftest.subprocess.PIPE)
        first = w.stdout.readline()
        assert first, "the locker never wrote"
        time.sleep(0.2)             # the locker writes for 0.2 s, on purpose
        os.kill(p.proc.pid, signal.SIGTERM)
        out, _ = w.communicate(timeout=10)
        acked = int((first + out).split()[-1]) + 1
        assert p.proc.wait(10) == 0
    finally:
        conftest._live.discard(p)
        p.force_cleanup()
    q = conftest.Powerfs(f"--state-file={state}", "--wakelock-limit=0").start()
    held = set()
    try:
        # (wake_lock lists only what fits in a page.)
        held = {n for n in q.sources() if n.startswith(b"ack")}
    finally:
        try:
            for n in held:
                q.write("wake_unlock", n)
        finally:
            q.stop()
    missing = [i for i in range(acked) if b"ack%06d" % i not in held]
    assert not missing, f"{len(missing)} of {acked} acknowledged " \
        f"locks lost, first {missing[:5]}"


def test_a_new_boot_starts_clean(mount, tmp_path):
    """The state file names its boot: one written before a reboot restores
    nothing, as the kernel keeps nothing (a lock and autosleep=mem used to
    come back, and autosleep suspended at the stale lock's release)."""
    state = tmp_path / "state"
    a = mount(f"--state-file={state}", "--simulate-sleep-ms=10")
    a.lock("stale")
    os.chmod(a.path("wake_lock"), 0o600)
    finish(a)
    text = state.read_text()
    boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    assert text.startswith(f"powerfs-state 2 {boot}\n")
    state.write_text(text.replace(boot, "00000000-1111-2222-3333-444444444444"))
    b = mount(f"--state-file={state}")
    assert b.active() == [] and b.inactive() == []
    assert b.read("autosleep") == b"off\n"
    assert os.stat(b.path("wake_lock")).st_mode & 0o777 == 0o644
    assert "is from another boot: starting clean" in b.log()
    assert state.read_text().startswith(f"powerfs-state 2 {boot}\n")


def test_a_lock_acknowledged_before_a_crash_survives(mount, tmp_path):
    """The line reaches the file before the write is answered: kill -9 at
    once after a write returns loses nothing."""
    state = tmp_path / "state"
    for i in range(5):
        a = mount(f"--state-file={state}")
        a.lock(f"crash{i}")
        a.proc.kill()
        a.proc.wait(5)
        conftest._live.discard(a)
        a.force_cleanup()
        a.stop = lambda: None
        b = mount(f"--state-file={state}")
        assert b.active() == [b"crash%d" % j for j in range(i + 1)]
        finish(b)
    c = mount(f"--state-file={state}")
    c.unlock(*(f"crash{j}" for j in range(5)))


def test_times_go_on_across_a_restart(mount, tmp_path):
    """Within a boot the monotonic clock goes on: a held lock keeps its
    activation time, and an armed handshake stays armed."""
    state = tmp_path / "state"
    a = mount(f"--state-file={state}")
    a.lock("idle")
    a.unlock("idle")
    c = a.count()
    assert a.write("wakeup_count", b"%d" % c) == len(str(c))
    a.lock("held")
    before = a.source("held")
    time.sleep(0.3)                 # time passes, on purpose
    finish(a)
    b = mount(f"--state-file={state}")
    after = b.source("held")
    assert after.last_change == before.last_change
    assert after.active_since >= before.active_since + 300
    assert after.active_count == before.active_count
    # Armed: the event since makes the next suspend fail.
    with conftest.raises_errno(errno.EBUSY):
        b.write("state", b"mem")
    b.unlock("held")


def test_a_snapshot_cut_short_by_a_crash_is_removed(mount, tmp_path):
    """A kill -9 while a snapshot is written leaves PATH.tmp (a snapshot is
    written beside the log, then renamed over it): the next start removes
    it and restores from the log, which the crash did not touch."""
    state = tmp_path / "state"
    a = mount(f"--state-file={state}")
    a.lock("kept")
    finish(a)
    tmp = tmp_path / "state.tmp"
    tmp.write_bytes(b"powerfs-state 2 half a snaps")
    b = mount(f"--state-file={state}")
    assert not tmp.exists()
    assert b.active() == [b"kept"]


# === The mapped log ==========================================================
# A line is a memcpy into a shared mapping of a file made at its capacity
# (whole pages, zero-padded): the log ends at the first NUL.

PAGE = os.sysconf("SC_PAGE_SIZE")
COMPACT_MIN = 256 * 1024


def log_end(data):
    return data.find(b"\0") if b"\0" in data else len(data)


def crash(inst):
    """kill -9 to the keeper and its server at once (no restart)."""
    inst.kill_all()
    inst.proc.wait(5)
    conftest._live.discard(inst)
    inst.force_cleanup()
    inst.stop = lambda: None


def padded_log_after_a_crash(mount, state, held):
    """A log that crossed two compactions and a page boundary, then the
    held locks taken and powerfs killed at once.  Returns the file."""
    a = mount(f"--state-file={state}", "--wakelock-limit=0")
    inodes = {os.stat(state).st_ino}
    deadline = time.monotonic() + 60
    i = 0
    while len(inodes) < 3 and time.monotonic() < deadline:
        a.lock(b"c%d" % (i % 20))
        a.unlock(b"c%d" % (i % 20))
        inodes.add(os.stat(state).st_ino)
        i += 1
    assert len(inodes) == 3, "never compacted twice"
    start = log_end(state.read_bytes())
    for name in held:
        a.lock(name)
    crash(a)
    data = state.read_bytes()
    end = log_end(data)
    assert start // PAGE < end // PAGE, (start, end)    # crossed a page
    return data


def test_a_kill_after_many_lines_keeps_every_acknowledged_lock(mount,
                                                              tmp_path):
    """kill -9 right after the writes returned, the log having crossed
    compactions and pages: every lock is back, no line dropped.  The file
    is its capacity (whole pages, zero-padded); the restore sees exactly
    the lines."""
    state = tmp_path / "state"
    held = [b"held%03d" % j for j in range(60)]
    data = padded_log_after_a_crash(mount, state, held)
    end = log_end(data)
    assert len(data) % PAGE == 0 and len(data) >= COMPACT_MIN
    assert data[end - 1:end] == b"\n"
    assert data[end:] == bytes(len(data) - end)
    b = mount(f"--state-file={state}", "--wakelock-limit=0")
    assert sorted(b.active()) == held
    assert "dropped 0 lines with a value out of range" in b.log()
    b.unlock(*held)
    finish(b)
    # A clean end leaves the lines only, as a write(2) log.
    text = state.read_bytes()
    assert b"\0" not in text and text.endswith(b"\n")


def test_the_log_ends_at_its_first_nul(mount, tmp_path):
    """A memcpy cut short by a crash leaves bytes, then NULs, maybe more
    bytes (it stores in any order): what follows the last newline before
    the first NUL is a torn line, not parsed (a complete-looking record
    cut before its newline used to be restored), nothing after the NUL is
    read, and neither counts as dropped."""
    state = tmp_path / "state"
    held = [b"held%03d" % j for j in range(60)]
    data = padded_log_after_a_crash(mount, state, held)
    end = log_end(data)
    line = next(l for l in data[:end].split(b"\n")
                if l.startswith(b"lock " + b"held000".hex().encode() + b" "))
    torn = line.replace(b"held000".hex().encode(), b"torn".hex().encode())
    after = line.replace(b"held000".hex().encode(), b"after".hex().encode())
    assert b" 1 " in torn                               # active
    data = bytearray(data)
    data[end:end + len(torn)] = torn                    # no newline
    at = end + len(torn) + 100
    data[at:at + len(after) + 1] = after + b"\n"        # past the NULs
    state.write_bytes(bytes(data))
    b = mount(f"--state-file={state}", "--wakelock-limit=0")
    assert sorted(b.active()) == held
    assert b"torn" not in b.read("wake_unlock")
    assert "dropped 0 lines with a value out of range" in b.log()
    b.unlock(*held)


def test_a_log_written_by_write2_loads(mount, tmp_path):
    """A log without padding (written by write(2), as powerfs did before
    the mapping, and as a clean end leaves it) ends at its size: it loads,
    and a line torn at its end is not counted."""
    state = tmp_path / "state"
    a = mount(f"--state-file={state}")
    a.lock("old")
    a.lock("idle")
    a.unlock("idle")
    finish(a)
    text = state.read_bytes()
    assert b"\0" not in text and text.endswith(b"\n")
    assert b"\nlock 6f6c64 1 " in text
    state.write_bytes(text + b"lock 6f6c6432 1 1")     # torn, at EOF
    b = mount(f"--state-file={state}")
    assert b.active() == [b"old"]
    assert b.inactive() == [b"idle"]
    assert "dropped 0 lines with a value out of range" in b.log()
    # The new file is made at its capacity.
    size = os.stat(state).st_size
    assert size % PAGE == 0 and size >= COMPACT_MIN
    b.unlock("old")


def _fill_a_small_tmpfs(base):
    """In a mount namespace of its own: a tmpfs of 640 KiB holds the
    state file (256 KiB at first); locks with long names make the log
    outgrow it, and its snapshot (about 200 KiB, so 800 KiB of capacity)
    cannot be allocated."""
    CLONE_NEWNS = 0x00020000
    if conftest._libc.unshare(CLONE_NEWNS) != 0:
        raise conftest.ChildSetupError("unshare(CLONE_NEWNS) failed")
    conftest.subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    small = os.path.join(base, "small")
    os.mkdir(small)
    conftest.subprocess.run(["mount", "-t", "tmpfs", "-o",
                             "size=640k,mode=0700", "tmpfs", small],
                            check=True)
    p = conftest.Powerfs(f"--state-file={small}/state",
                         "--wakelock-limit=0").start()
    names = [b"%03d" % j + b"n" * 997 for j in range(100)]
    try:
        for n in names:
            p.lock(n)
        alive = p.alive()
        active = len(p.sources())
        for n in names:
            p.unlock(n)
        p.lock("after")
        after = p.active()
        p.unlock("after")
    finally:
        p.stop()
    return alive, active, after, p.final_log


def test_a_full_disk_stops_the_state_file_not_the_server(tmp_path):
    """The log's file is allocated when it is made: a file system that
    cannot hold the next one fails then, with ENOSPC, and powerfs says so
    once and serves on without the state file (a store into a mapped page
    the disk cannot give would have been SIGBUS)."""
    try:
        alive, active, after, log = conftest.run_in_child(
            _fill_a_small_tmpfs, str(tmp_path), timeout=60)
    except conftest.ChildSetupError as e:
        import pytest
        pytest.skip(f"no private mount namespace: {e}")
    assert alive, log
    assert active >= 100, log
    assert after == [b"after"]
    assert log.count("No space left on device; no longer kept") == 1, log
