"""--backend=sysfs:DIR: the state goes to DIR/state, its errno is the result.

DIR is a temporary directory (a plain file, or a FIFO to see the write) or a
second, simulated powerfs (a chain: the outer one serves a container, the
inner one plays the host).
"""

import ctypes
import errno
import os
import resource
import shutil
import subprocess
import threading
import time

import conftest
from conftest import Reader, raises_errno, wait_until


def test_states_come_from_dir_state(mount, tmp_path):
    (tmp_path / "state").write_text("freeze mem\n")
    pfs = mount(f"--backend=sysfs:{tmp_path}")
    assert pfs.read("state") == b"freeze mem\n"
    with raises_errno(errno.ENOSYS):
        pfs.write("state", b"disk")


def test_state_written_to_dir_state(mount, tmp_path):
    state = tmp_path / "state"
    state.write_text("mem disk\n")
    pfs = mount(f"--backend=sysfs:{tmp_path}")
    # Swap in a FIFO to watch the suspend write arrive.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    os.rename(fifo, state)
    got = []
    reader = threading.Thread(target=lambda: got.append(state.read_bytes()))
    reader.start()
    assert pfs.write("state", b"disk\n") == 5
    reader.join(5)
    assert got == [b"disk"]
    # The writer was answered as the sleep began: the backend's task
    # counts the success when it returns, a moment later.
    assert wait_until(
        lambda: pfs.read("suspend_stats/success") == b"1\n"), \
        pfs.read("suspend_stats/success")


def test_backing_write_error_goes_to_suspend_stats(mount, tmp_path):
    """The state write is answered when the host's sleep begins, before the
    backing write (its writer must not sit in a request while the host
    freezes tasks): the backing write's error goes to suspend_stats."""
    state = tmp_path / "state"
    state.write_text("mem\n")
    pfs = mount(f"--backend=sysfs:{tmp_path}")
    os.unlink(state)
    os.mkdir(state)                      # open(O_WRONLY) -> EISDIR
    assert pfs.write("state", b"mem") == 3
    assert wait_until(lambda: pfs.read("suspend_stats/fail") == b"1\n")
    assert pfs.read("suspend_stats/failed_suspend") == b"1\n"
    assert pfs.read("suspend_stats/last_failed_errno") == b"-21\n"
    assert pfs.read("suspend_stats/last_failed_step") == b"suspend\n"
    assert pfs.read("suspend_stats/success") == b"0\n"


def test_the_host_kernels_failed_step_is_taken(mount, tmp_path):
    """A failure counts at the step the host's kernel names in
    DIR/suspend_stats/last_failed_step."""
    (tmp_path / "state").write_text("mem\n")
    stats = tmp_path / "suspend_stats"
    stats.mkdir()
    for name, value in (("success", "4"), ("fail", "2"),
                        ("last_failed_step", "suspend_noirq")):
        (stats / name).write_text(value + "\n")
    pfs = mount(f"--backend=sysfs:{tmp_path}")
    os.unlink(tmp_path / "state")
    os.mkdir(tmp_path / "state")
    assert pfs.write("state", b"mem") == 3
    assert wait_until(lambda: pfs.read("suspend_stats/fail") == b"1\n")
    assert pfs.read("suspend_stats/last_failed_step") == \
        b"suspend_noirq\n"
    assert pfs.read("suspend_stats/failed_suspend_noirq") == b"1\n"


class FileSizeLimited(conftest.Powerfs):
    """powerfs started under RLIMIT_FSIZE=limit: a write(2) to a regular
    file that would end past limit bytes is cut short there (with SIGXFSZ
    only if nothing at all could be written).  Its output goes through a
    pipe, copied to the log by this process, which the limit does not
    bind."""

    def __init__(self, limit, *args):
        super().__init__(*args)
        self.limit = limit

    def start(self):
        log = open(self.logpath, "wb", buffering=0)
        self.proc = subprocess.Popen(
            [conftest.POWERFS, "-f", *self.args, self.mnt],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: resource.setrlimit(
                resource.RLIMIT_FSIZE, (self.limit, self.limit)))
        self.copier = threading.Thread(
            target=lambda: (shutil.copyfileobj(self.proc.stdout, log, 1),
                            log.close()), daemon=True)
        self.copier.start()
        if not wait_until(lambda: os.path.ismount(self.mnt)
                          or self.proc.poll() is not None,
                          timeout=conftest.MOUNT_TIMEOUT) \
                or not os.path.ismount(self.mnt):
            self.force_cleanup()
            raise AssertionError(f"not mounted; output:\n{self.log()}")
        self.dev = os.stat(self.mnt).st_dev
        conftest._live.add(self)
        return self


def test_a_short_backing_write_is_a_failure_with_eio(tmp_path):
    """DIR/state takes 2 of the 6 bytes of "freeze" (a file size limit
    stands in for a full file system): write(2) returns 2 and sets no
    errno.  The attempt failed, with EIO; a stale errno (0 in a fresh
    thread) would count it a success."""
    (tmp_path / "state").write_text("freeze mem\n")
    # The keeper's server saves a state file, which the limit would cut
    # short too (binaries from before the keeper have no such option).
    no_keeper = ["--no-keeper"] if b"--no-keeper" in subprocess.run(
        [conftest.POWERFS, "--help"], capture_output=True).stdout else []
    pfs = FileSizeLimited(2, *no_keeper,
                          f"--backend=sysfs:{tmp_path}").start()
    try:
        (tmp_path / "state").unlink()    # empty again: the write starts at 0
        (tmp_path / "state").write_bytes(b"")
        assert pfs.write("state", b"freeze") == 6
        assert wait_until(lambda: pfs.read("suspend_stats/fail") == b"1\n"
                          or pfs.read("suspend_stats/success") != b"0\n")
        assert (tmp_path / "state").read_bytes() == b"fr"
        assert pfs.read("suspend_stats/success") == b"0\n"
        assert pfs.read("suspend_stats/fail") == b"1\n"
        assert pfs.read("suspend_stats/failed_suspend") == b"1\n"
        assert pfs.read("suspend_stats/last_failed_errno") == b"-5\n"
    finally:
        pfs.stop()


_libc = ctypes.CDLL(None, use_errno=True)
_libc.write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
_libc.write.restype = ctypes.c_ssize_t


def libc_write(path, data):
    """One write(2) through libc: (result, errno), EINTR not retried."""
    fd = os.open(path, os.O_WRONLY)
    try:
        n = _libc.write(fd, data, len(data))
        return n, ctypes.get_errno() if n < 0 else 0
    finally:
        os.close(fd)


def blocked_backing_write(tmp_path):
    """DIR/state as a FIFO nobody reads yet: the backing write, the host's
    sleep, lasts until release() is called."""
    state = tmp_path / "state"
    os.unlink(state)
    os.mkfifo(state)
    got = []

    def release():
        fd = os.open(state, os.O_RDONLY | os.O_NONBLOCK)
        try:
            deadline = time.monotonic() + 5
            data = b""
            while not data and time.monotonic() < deadline:
                try:
                    data = os.read(fd, 64)
                except BlockingIOError:
                    time.sleep(0.01)
            got.append(data)
        finally:
            os.close(fd)
    return release, got


def test_nobody_waits_in_powerfs_while_the_host_sleeps(mount, tmp_path):
    """From the state write that starts the host's sleep until the backing
    write returns: the writer has its answer, a reader blocked in
    wakeup_count gets EINTR at once (the freezer's fake signal), one that
    comes back gets the count without waiting, though a lock is held (it
    would retry EINTR in a loop); a state or wakeup_count write that would
    wait gets EBUSY (EINTR would have bash or Python retry in a loop); an
    autosleep write that would wait is answered and carried out
    after the resume; everything else is served.  Afterwards readers block
    again."""
    (tmp_path / "state").write_text("mem\n")
    pfs = mount(f"--backend=sysfs:{tmp_path}")
    release, got = blocked_backing_write(tmp_path)
    count = pfs.read("wakeup_count")
    pfs.lock("held")
    with Reader(pfs.path("wakeup_count")) as r:
        r.wait_in_read()
        assert conftest.timed(pfs.write, "state", b"mem", timeout=2) == 3
        assert r.result(2) == (-1, errno.EINTR, b"")
    with Reader(pfs.path("wakeup_count")) as r:
        assert r.result(2) == (len(count), 0, count)
    for name, data in (("wakeup_count", b"0"), ("state", b"mem")):
        assert conftest.timed(libc_write, pfs.path(name), data,
                              timeout=2) == (-1, errno.EBUSY)
    # bash's echo retries a write that failed with EINTR.
    r = subprocess.run(["bash", "-c", f"echo mem > {pfs.path('state')}"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1
    assert r.stderr.endswith("write error: Device or resource busy\n")
    assert conftest.timed(pfs.write, "autosleep", b"mem", timeout=2) == 3
    assert pfs.read("autosleep") == b"off\n"   # not yet: after the resume
    pfs.lock("other")
    pfs.unlock("other")
    release()
    assert got == [b"mem"]
    assert wait_until(lambda: pfs.read("suspend_stats/success") == b"1\n")
    assert wait_until(lambda: pfs.read("autosleep") == b"mem\n")
    assert pfs.write("autosleep", b"off") == 3
    with Reader(pfs.path("wakeup_count")) as r:
        r.wait_in_read()
        assert r.blocked(0.3)
        pfs.unlock("held")
        n, err, data = r.result(2)
        assert (n, err) == (len(data), 0) and data.endswith(b"\n")


def test_the_freeze_waits_for_those_answered_to_come_back(mount, tmp_path):
    """Callers answered as the host's sleep begins may come back at once (a
    read retried after EINTR, a suspend loop reading wakeup_count again),
    and must be answered before the backing write starts the host's freeze
    (powerfs's own tasks freeze then): when anyone was answered, the write
    waits 100 ms.  The FIFO's open(2) returns when the write begins."""
    (tmp_path / "state").write_text("mem\n")
    pfs = mount(f"--backend=sysfs:{tmp_path}")
    state = tmp_path / "state"
    os.unlink(state)
    os.mkfifo(state)
    opened = []

    def watch():
        fd = os.open(state, os.O_RDONLY)
        opened.append(time.monotonic())
        got.append(os.read(fd, 64))
        os.close(fd)
    got = []
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    pfs.lock("held")
    with Reader(pfs.path("wakeup_count")) as r:
        r.wait_in_read()
        assert conftest.timed(pfs.write, "state", b"mem", timeout=2) == 3
        assert r.result(2) == (-1, errno.EINTR, b"")
        answered = time.monotonic()
    count = pfs.read("wakeup_count")     # comes back: answered at once
    watcher.join(5)
    assert got == [b"mem"]
    assert opened[0] - answered >= 0.08, opened[0] - answered
    assert count.endswith(b"\n") and count[:-1].isdigit()
    pfs.unlock("held")


def test_chained_through_a_second_powerfs(mount):
    """The outer powerfs answers its writer as its host's sleep begins (it
    writes the inner's state); it counts the sleep once the inner has
    (the inner simulates: it counts when its write returns)."""
    inner = mount("--simulate-sleep-ms=1500", "--simulate-states=mem")
    outer = mount(f"--backend=sysfs:{inner.mnt}")
    assert outer.read("state") == b"mem\n"
    assert conftest.timed(outer.write, "state", b"mem", timeout=2) == 3
    assert wait_until(lambda: outer.read("suspend_stats/success") == b"1\n",
                      timeout=10)
    assert inner.read("suspend_stats/success") == b"1\n"
    # A lock in the outer one does not reach the inner one.
    outer.lock("x")
    assert inner.read("wake_lock") == b"\n"
    outer.unlock("x")


def test_chained_failure_propagates(mount):
    inner = mount("--simulate-states=mem")
    outer = mount(f"--backend=sysfs:{inner.mnt}")
    inner.write("autosleep", b"mem")     # the inner "host" refuses: EBUSY
    try:
        assert outer.write("state", b"mem") == 3
        assert wait_until(
            lambda: outer.read("suspend_stats/fail") == b"1\n")
    finally:
        inner.write("autosleep", b"off")
    assert outer.read("suspend_stats/last_failed_errno") == b"-16\n"


def test_refuses_its_own_mount_point(tmp_path):
    (tmp_path / "state").write_text("mem\n")
    r = subprocess.run([conftest.POWERFS, "-f", f"--backend=sysfs:{tmp_path}",
                        str(tmp_path)], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2
    assert "loop" in r.stderr and len(r.stderr.splitlines()) == 1


def test_unreadable_dir_is_an_error(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([conftest.POWERFS, "-f",
                        f"--backend=sysfs:{tmp_path}/nothing", str(mnt)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "No such file" in r.stderr and len(r.stderr.splitlines()) == 1
