"""scripts/powerfs-container: a command runs with powerfs over /sys/power in
a private mount namespace; the host's view stays as it was."""

import os
import subprocess

import conftest

SCRIPT = str(conftest.REPO / "scripts" / "powerfs-container")


def run(*args, timeout=30):
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True,
                          timeout=timeout,
                          env=dict(os.environ, POWERFS=conftest.POWERFS))


def host_view():
    with open("/proc/self/mountinfo") as f:
        mounts = [line for line in f if " /sys/power " in line
                  or " /sys/kernel/debug" in line]
    return sorted(os.listdir("/sys/power")), mounts


def test_command_sees_powerfs_over_sys_power():
    before = host_view()
    r = run("sh", "-c", "cat /sys/power/state; echo c1 > /sys/power/wake_lock;"
            " cat /sys/power/wake_lock;"
            " ls /sys/power")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "freeze mem disk"
    assert out[1] == "c1"
    assert "wakeup_sources" in out and "suspend_stats" in out
    assert host_view() == before


def test_exit_status_is_the_commands():
    assert run("sh", "-c", "exit 7").returncode == 7


def test_debugfs_binds_statistics():
    r = run("--debugfs", "sh", "-c", "echo x > /sys/power/wake_lock;"
            " cat /sys/kernel/debug/wakeup_sources")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("name\t\tactive_count\t")
    assert "\nx           \t1\t\t1\t\t" in r.stdout


def test_powerfs_options_are_passed():
    r = run("--powerfs-opt=--simulate-states=mem", "cat", "/sys/power/state")
    assert (r.returncode, r.stdout) == (0, "mem\n")


def test_powerfs_exits_with_the_command():
    r = run("sh", "-c", 'pgrep -f "powerfs .*$POWERFS_CONTAINER_MOUNT"')
    assert r.returncode == 0, r.stderr
    pids = [int(x) for x in r.stdout.split()]
    assert len(pids) == 2, pids     # the keeper and its server
    for pid in pids:
        assert conftest.wait_until(lambda: not os.path.exists(f"/proc/{pid}"))


def test_usage_errors():
    assert run().returncode == 2
    r = run("--bogus", "true")
    assert r.returncode == 2 and "unknown option" in r.stderr


# An alarm timerfd due in 1 s, then mem to /sys/power/state: prints what
# the write returned, how late after the alarm it returned, and whether
# the process runs in the cgroup the script made for it.
_ALARM_THEN_SLEEP = r'''
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
class TS(ctypes.Structure): _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
class ITS(ctypes.Structure): _fields_ = [("i", TS), ("v", TS)]
tfd = libc.timerfd_create(9, 0)                 # CLOCK_BOOTTIME_ALARM
due = time.clock_gettime(time.CLOCK_BOOTTIME) + 1
assert libc.timerfd_settime(tfd, 0, ctypes.byref(ITS(TS(0, 0), TS(1, 0))), None) == 0
cg = os.environ["POWERFS_CONTAINER_CGROUP"]
mine = open("/proc/self/cgroup").read()
inside = any(line.endswith(":/" + os.path.basename(cg)) for line in mine.splitlines())
fd = os.open("/sys/power/state", os.O_WRONLY)
n = os.write(fd, b"mem")
print(n, round(time.clock_gettime(time.CLOCK_BOOTTIME) - due, 3), inside, cg)
'''


def test_freeze_puts_the_command_to_sleep_until_its_alarm():
    """--freeze: the command runs in a cgroup of its own, which its write
    of mem freezes until its alarm; the cgroup is gone afterwards."""
    r = run("--freeze", "--", "/usr/bin/python3", "-c", _ALARM_THEN_SLEEP)
    assert r.returncode == 0, r.stderr
    n, late, inside, cgroup = r.stdout.split()
    assert (n, inside) == ("3", "True"), r.stdout
    assert 0 <= float(late) < 0.1, r.stdout
    assert conftest.wait_until(lambda: not os.path.exists(cgroup), timeout=5)
