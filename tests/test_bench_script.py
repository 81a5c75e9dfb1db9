"""scripts/bench runs as the README shows it: a smoke run of one round of
its pair rows, with the README's own variants.

The bench is a measuring tool (its figures are not asserted here: timed
tests would fail on a busy machine); this checks that the command the
README's Performance section shows works, prints both floors and every
variant, and leaves nothing mounted behind.
"""

import re
import shlex
import subprocess

import pytest

import conftest


def readme_bench_commands():
    """The commands of the code block in README.md's Performance section:
    the build of a variant, then scripts/bench."""
    text = (conftest.REPO / "README.md").read_text()
    section = text[text.index("\n## Performance\n"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"\n```\n(.*?\nscripts/bench .*?)\n```\n", section, re.S)
    assert len(blocks) == 1, "README's Performance shows no single bench block"
    build, bench = blocks[0].split("\nscripts/bench ", 1)
    return build, shlex.split("scripts/bench " + bench.replace("\\\n", " "))


@pytest.mark.timeout(300)
def test_the_readmes_bench_commands_run():
    build, argv = readme_bench_commands()
    r = subprocess.run(build, shell=True, cwd=conftest.REPO, capture_output=True,
                       text=True, timeout=200)
    assert r.returncode == 0, r.stdout + r.stderr
    variants = [a.split("=", 1)[0] for a in argv[argv.index("--variant") + 1::2]
                if "=" in a]
    assert variants, argv
    # One round of rows 1 and 2 only: the rest is what a full run adds.
    r = subprocess.run(argv + ["--pairs-only", "--rounds", "1"], cwd=conftest.REPO,
                       capture_output=True, text=True, timeout=280)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert re.search(r"\n1 +lock\+unlock pair, 1 client +us/pair +\d", out), out
    assert re.search(r"\n +single-threaded floor \(right col\.\) +us/pair +\d", out), out
    assert re.search(r"\n2 +pairs, 4 clients in parallel +pairs/s +\d", out), out
    # Against whichever do-nothing server was fastest in this run.
    fastest = re.findall(r"\n +powerfs vs the fastest floor, the (MT loop|"
                         r"single-threaded loop|MT loop with clone_fd|poll loop) "
                         r"+(us/pair|pairs/s) +\d", out)
    assert [unit for _, unit in fastest] == ["us/pair", "pairs/s"], out
    # The floor that checks each writer's capability, as the kernel does.
    assert len(re.findall(r"\n +MT floor \+ capget per write \(the kernel's "
                          r"check\) \(right col\.\) +(?:us/pair|pairs/s) +\d",
                          out)) == 2, out
    assert re.findall(r"\n +powerfs vs the MT floor with capget +(us/pair|pairs/s) +\d",
                      out) == ["us/pair", "pairs/s"], out
    for v in variants:
        assert re.search(r"\n +variant %s \(right col\.\), 1 client +us/pair +\d"
                         % re.escape(v), out), (v, out)
        assert re.search(r"\n +variant %s \(right col\.\), 4 clients +pairs/s +\d"
                         % re.escape(v), out), (v, out)
    assert re.search(r"\nbench: \d of 2 targets met", out), out
    with open("/proc/self/mounts") as f:
        assert "/powerfs-bench." not in f.read()


def test_bench_open_runs():
    """scripts/bench-open, small: it prints a row per round and build and
    the medians with the ratio against the single opener, and leaves
    nothing mounted."""
    r = subprocess.run(["scripts/bench-open", "--powerfs", conftest.POWERFS,
                        "--rounds", "1", "--threads",
                        "20", "--each", "2", "--single", "50", "--also",
                        conftest.POWERFS], cwd=conftest.REPO,
                       capture_output=True, text=True, timeout=120)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert len(re.findall(r"\nround 1 (powerfs|also) +single +[\d.]+ us/open +"
                          r"concurrent +[\d.]+ us/open +ratio +[\d.]+", out)) == 2, out
    assert len(re.findall(r"\n +(powerfs|also) +single .* ratio [\d.]+ \((NOT )?"
                          r"within 2x\)", out)) == 2, out
    with open("/proc/self/mounts") as f:
        assert "/powerfs-bench-open-" not in f.read()
