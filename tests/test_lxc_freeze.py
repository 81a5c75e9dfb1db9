"""A real LXC container that sleeps on its own (--backend=freeze:CGROUP).

A privileged busybox container (lxc-create -t busybox, in a temporary
lxcpath, a name of its own) gets the host's powerfs over its /sys/power,
and the powerfs's wakeup_reasons and /sys/class/wakeup mounts under /mnt;
powerfs was started before the container, on the container's cgroup
(lxc.payload.NAME, which LXC makes when the container starts), once in the
cgroup v2 hierarchy and once in the v1 freezer's where the host has both.
Inside, through lxc-attach (the host's Python bound in): Android's
SystemSuspend loop, a process that counts in a loop and a
CLOCK_BOOTTIME_ALARM timerfd due in 2 s (tests/android/client.py's
container_sleep).  The container's tasks, attached ones included (LXC puts
them in a child cgroup, ".lxc"), are frozen while it sleeps.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import conftest
from conftest import ExtraMounts, wait_until
from test_freeze import (ALARM_LATE_MAX, WAKE_MAX, Cgroup, counter_value,
                         gone, host_lock, kill_android, left_asleep_thawed,
                         stop_android)

pytestmark = pytest.mark.timeout(240)

CLIENT_DIR = os.path.dirname(conftest.REPO / "tests" / "android" / "client.py")


def cgroup_root(v1):
    """Where LXC's cgroups are: the v1 freezer's hierarchy, or the v2 one
    (None if the host has no such mount)."""
    with open("/proc/self/mountinfo") as f:
        for ln in f:
            fields = ln.split()
            sep = fields.index("-")
            fstype, opts = fields[sep + 1], fields[sep + 3].split(",")
            if (fstype == "cgroup" and "freezer" in opts) if v1 \
                    else fstype == "cgroup2":
                return fields[4]
    return None


def run(*argv, timeout=60, check=True):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    if check and r.returncode:
        raise AssertionError(f"{argv}: {r.returncode}\n{r.stderr}")
    return r


class LxcCgroup(Cgroup):
    """The container's cgroup, made by LXC."""

    def __init__(self, version, path):
        self.version, self.dir, self.procs = version, path, []


@pytest.fixture(scope="module", params=["v2", "v1"])
def lxc(request):
    if os.geteuid() != 0:
        pytest.skip("LXC tests need root")
    for tool in ("lxc-create", "lxc-start", "lxc-attach"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} missing: run scripts/install-deps.sh")
    v1 = request.param == "v1"
    root = cgroup_root(v1)
    if root is None:
        pytest.skip(f"no {request.param} hierarchy here")
    name = f"pfsfz{os.getpid() % 100000}{request.param}"
    with contextlib.ExitStack() as stack:
        path = tempfile.mkdtemp(prefix="powerfs-lxcfz-")
        os.chmod(path, 0o755)
        stack.callback(shutil.rmtree, path, ignore_errors=True)
        work = os.path.join(path, "work")
        os.mkdir(work)
        os.chmod(work, 0o777)
        cg = LxcCgroup(request.param, os.path.join(root, f"lxc.payload.{name}"))
        pfs = ExtraMounts("-d", "-o", "allow_other",
                          f"--backend=freeze:{cg.dir}",
                          extra=("wakeup-reasons", "class-wakeup")).start()
        stack.callback(pfs.stop)
        conf = os.path.join(path, "create.conf")
        with open(conf, "w") as f:
            f.write("lxc.net.0.type = empty\n")
        run("lxc-create", "-n", name, "-P", path, "-t", "busybox", "-f", conf,
            timeout=120)
        stack.callback(run, "lxc-destroy", "-f", "-n", name, "-P", path,
                       check=False)
        python = os.path.realpath("/usr/bin/python3")
        with open(os.path.join(path, name, "config"), "a") as f:
            f.write(f"""
lxc.mount.entry = {pfs.mnt} sys/power none bind 0 0
lxc.mount.entry = {pfs.extra["wakeup-reasons"]} mnt/reasons none bind,create=dir 0 0
lxc.mount.entry = {pfs.extra["class-wakeup"]} mnt/wakeup none bind,create=dir 0 0
lxc.mount.entry = {python} usr/bin/python3 none ro,bind,create=file 0 0
lxc.mount.entry = {CLIENT_DIR} mnt/client none ro,bind,create=dir 0 0
lxc.mount.entry = {work} mnt/work none bind,create=dir 0 0
""")
        run("lxc-start", "-n", name, "-P", path, timeout=60)
        stack.callback(run, "lxc-stop", "-k", "-n", name, "-P", path,
                       check=False, timeout=60)
        stack.callback(cg.thaw)
        run("lxc-wait", "-n", name, "-P", path, "-s", "RUNNING", "-t", "30")
        assert os.path.isdir(cg.dir), cg.dir
        yield name, path, cg, pfs, work


def attach(name, path, *cmd):
    env = ["CLIENT_WAKEUP_REASONS=/mnt/reasons",
           "CLIENT_CLASS_WAKEUP=/mnt/wakeup"]
    return subprocess.Popen(
        ["lxc-attach", "-n", name, "-P", path, "--clear-env", "--", "env",
         *env, *cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def test_android_in_lxc_sleeps_until_its_alarm_and_the_host(lxc,
                                                            record_property):
    """Inside the container: SystemSuspend's loop, a counter and an alarm
    due in 2 s.  The container sleeps (every task frozen: the counter
    stops, no CPU), wakes within ALARM_LATE_MAX of the alarm, sleeps again
    and wakes at once for a host wake_lock; every mem write returned 3,
    and the reasons and statistics say why."""
    name, path, cg, p, work = lxc
    for f in os.listdir(work):
        os.unlink(os.path.join(work, f))
    android = attach(name, path, "/usr/bin/python3", "/mnt/client/client.py",
                     "container_sleep", "/mnt/work", "2")
    try:
        assert android.stdout.readline() == "ready\n", android.stderr.read()
        assert cg.wait_state("FROZEN", timeout=10), cg.state()
        count, cpu = counter_value(work), cg.cpu_ns()
        time.sleep(0.5)
        assert cg.state() == "FROZEN"
        assert counter_value(work) == count and cg.cpu_ns() == cpu
        assert "write interrupted by the freezer of its sleep" in p.log()
        assert wait_until(lambda: os.path.exists(f"{work}/alarm"), timeout=10)
        with open(f"{work}/alarm") as f:
            alarm = json.load(f)
        late = alarm["fired"] - alarm["due"]
        record_property("alarm_late_s", round(late, 4))
        assert 0 <= late < ALARM_LATE_MAX, alarm
        assert wait_until(lambda: counter_value(work) > count, timeout=5)
        assert cg.wait_state("FROZEN", timeout=10), cg.state()
        t0 = time.monotonic()
        host_lock(p, b"hostwake")
        assert cg.wait_state("THAWED", timeout=5)
        record_property("host_wake_s", round(time.monotonic() - t0, 4))
        assert time.monotonic() - t0 < WAKE_MAX
        res = stop_android(p, android, work)
    finally:
        kill_android(p, android)
        android.communicate(timeout=30)
    assert res["errors"] == [] and res["thread_ended"], res
    reasons = [c["reasons"] for c in res["cycles"]]
    assert reasons == [["-1 alarmtimer"], ["-1 hostwake"]], reasons
    assert all(c["success"] for c in res["cycles"])
    assert (res["suspend_stats"]["success"], res["suspend_stats"]["fail"]) \
        == (2, 0), res["suspend_stats"]


def test_kill_9_of_the_server_leaves_no_frozen_container(lxc):
    """The container asleep (its own write of mem), kill -9 of the
    server: the next one thaws it, and the write returns 3."""
    name, path, cg, p, work = lxc
    w = attach(name, path, "sh", "-c", "echo mem > /sys/power/state; echo $?")
    assert cg.wait_state("FROZEN", timeout=10), cg.state()
    server = p.server_pid()
    os.kill(server, signal.SIGKILL)
    assert wait_until(lambda: gone(server), timeout=5)
    assert cg.wait_state("THAWED", timeout=10), cg.state()
    out, err = w.communicate(timeout=30)
    assert out == "0\n", err
    assert wait_until(lambda: left_asleep_thawed(p.log()))
