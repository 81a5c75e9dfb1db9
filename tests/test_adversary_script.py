"""scripts/adversary runs: a smoke run of its fastest attack (statefile).

The script is a measuring tool (its figures are not asserted here); this
checks that it runs against the built powerfs, prints its summary table and
leaves nothing mounted behind.
"""

import os
import re
import subprocess

import pytest

import conftest

SCRIPT = str(conftest.REPO / "scripts" / "adversary")


@pytest.mark.timeout(120)
def test_quick_statefile_run_prints_the_table_and_cleans_up():
    r = subprocess.run([SCRIPT, "--quick", "--only=statefile", conftest.POWERFS],
                       capture_output=True, text=True, timeout=110)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert out.startswith("powerfs adversary: %s; attacker uid 1000" % conftest.POWERFS), out
    assert "\n== 4. --state-file in a directory that does not exist" in out
    # The attack's own table: both instances, each with a verdict on starting.
    assert re.search(r"\n   existing dir \(baseline\)  +(yes|no \(exit \d+\)) ", out), out
    assert re.search(r"\n   missing dir  +(yes|no \(exit \d+\)) ", out), out
    # The summary table, with its head and the statefile row.
    summary = out[out.index("\n== summary (load average "):]
    lines = summary.splitlines()[1:]
    assert re.fullmatch(r"   attack +figure +baseline +measured +target +result",
                        lines[1]), summary
    assert re.fullmatch(r"   -+", lines[2]), summary
    assert re.match(r"   4 statefile +starts with the state file's dir missing +"
                    r"yes +(yes|no \(exit \d+\)) +\(none set\) +info$", lines[3]), summary
    assert re.fullmatch(r"adversary: \d+ of \d+ targets met; load average "
                        r"\d+\.\d\d( \(busy\))?", lines[-1]), summary
    # It cleaned up: its temporary directory (named in the first line) is
    # unmounted and gone.
    tmp = re.search(r"; mounts under (/\S+/powerfs-adversary\.[^/\s]+)\n", out)
    assert tmp, out
    with open("/proc/self/mounts") as f:
        assert tmp.group(1) not in f.read()
    assert not os.path.exists(tmp.group(1))
