"""--backend=sysfs:DIR: the state goes to DIR/state, its errno is the result.

DIR is a temporary directory (a plain file, or a FIFO to see the write) or a
second, simulated powerfs (a chain: the outer one serves a container, the
inner one plays the host).
"""

import errno
import os
import subprocess
import threading
import time

import conftest
from conftest import Background, raises_errno, wait_until


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
    assert pfs.read("suspend_stats/success") == b"1\n"


def test_backing_write_error_is_the_result(mount, tmp_path):
    state = tmp_path / "state"
    state.write_text("mem\n")
    pfs = mount(f"--backend=sysfs:{tmp_path}")
    os.unlink(state)
    os.mkdir(state)                      # open(O_WRONLY) -> EISDIR
    with raises_errno(errno.EISDIR):
        pfs.write("state", b"mem")
    assert pfs.read("suspend_stats/fail") == b"1\n"
    assert pfs.read("suspend_stats/failed_suspend") == b"1\n"
    assert pfs.read("suspend_stats/last_failed_errno") == b"-21\n"
    assert pfs.read("suspend_stats/last_failed_step") == b"suspend\n"


def test_chained_through_a_second_powerfs(mount):
    inner = mount("--simulate-sleep-ms=300", "--simulate-states=mem")
    outer = mount(f"--backend=sysfs:{inner.mnt}")
    assert outer.read("state") == b"mem\n"
    w = Background(outer.write, "state", b"mem")
    assert w.wait(5) == 3
    assert w.elapsed() >= 0.25          # returned after the inner "resume"
    assert inner.read("suspend_stats/success") == b"1\n"
    assert outer.read("suspend_stats/success") == b"1\n"
    # A lock in the outer one does not reach the inner one.
    outer.lock("x")
    assert inner.read("wake_lock") == b"\n"
    outer.unlock("x")


def test_chained_failure_propagates(mount):
    inner = mount("--simulate-states=mem")
    outer = mount(f"--backend=sysfs:{inner.mnt}")
    inner.write("autosleep", b"mem")     # the inner "host" refuses: EBUSY
    try:
        with raises_errno(errno.EBUSY):
            outer.write("state", b"mem")
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
