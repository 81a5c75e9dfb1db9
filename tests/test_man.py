"""The man pages: each renders without a warning, says what --help says
(option for option, both ways), and every cross-reference names a section
that exists or another page that does.

The pages are by audience: powerfs(1) the command, powerfs(5) the files it
writes, powerfs(7) the files it serves, powerfs-report(1) the report.
"""

import os
import re
import subprocess

import pytest

import conftest

PAGES = {"powerfs.1": "POWERFS", "powerfs.5": "POWERFS",
         "powerfs.7": "POWERFS", "powerfs-report.1": "POWERFS-REPORT"}
REPORT = conftest.REPO / "src" / "powerfs-report.py"


def source(page):
    return (conftest.REPO / page).read_text()


def plain(roff):
    """roff source as text: font escapes gone, \\- a hyphen."""
    text = re.sub(r"\\f[BIRP]", "", roff)
    text = text.replace("\\-", "-").replace("\\(lq", '"').replace("\\(rq", '"')
    return text.replace("\\&", "").replace("\\e", "\\")


def sections(page):
    """The page's headings (.SH and .SS), as they read."""
    heads = re.findall(r"^\.S[HS] (.+)$", source(page), re.M)
    return {plain(h).strip('"') for h in heads}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_renders_without_warnings(page):
    """`man --warnings -l` passes groff's warnings on: there must be
    none (an undefined macro, a bad escape, a line that cannot be
    set)."""
    r = subprocess.run(["man", "--warnings", "-l", str(conftest.REPO / page)],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8",
                                MANPAGER="cat", PAGER="cat"))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    assert r.stdout.lstrip().startswith(PAGES[page] + "("), r.stdout[:200]


def options_of_page(page):
    """{option: takes a value} from the tags of the OPTIONS section."""
    text = source(page)
    body = text[text.index("\n.SH OPTIONS\n"):]
    body = body[:body.index("\n.SH ", 1)]
    tags = re.findall(r"^\.TP\n(.+)$", body, re.M)
    opts = {}
    for tag in tags:
        tag = plain(tag)
        for name, value in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)( ?=)?", tag):
            opts[name] = bool(value)
    return opts


def options_of_help(argv):
    """{option: takes a value} from the lines of --help that begin with
    an option."""
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True,
                         timeout=30).stdout
    opts = {}
    for line in out.splitlines():
        m = re.match(r"^ {2}(-\w, )?(--[\w-]+)(=)?", line)
        if m:
            if m.group(1):
                opts[m.group(1)[:2]] = bool(m.group(3))
            opts[m.group(2)] = bool(m.group(3))
    return opts, out


def test_powerfs_help_and_man_page_list_the_same_options():
    page = options_of_page("powerfs.1")
    helped, out = options_of_help([conftest.POWERFS])
    assert len(helped) > 20, out
    assert sorted(set(helped) - set(page)) == [], "in --help, not in powerfs.1"
    assert sorted(set(page) - set(helped)) == [], "in powerfs.1, not in --help"
    # (A short option takes a value when its long one does.)
    differ = {o for o in page if o.startswith("--") and page[o] != helped[o]}
    assert not differ, f"take a value in one and not the other: {differ}"


def test_report_help_and_man_page_list_the_same_options():
    page = options_of_page("powerfs-report.1")
    out = subprocess.run([conftest.PYTHON, str(REPORT), "--help"],
                         capture_output=True, text=True, timeout=30).stdout
    # The report's --help names its modes in its usage text, the other
    # options in a list: every --name it mentions is an option.
    helped = {}
    for name, value in re.findall(r"(--[a-z][\w-]*)(=)?", out):
        helped[name] = helped.get(name, False) or bool(value)
    assert len(helped) >= 7, out
    assert sorted(set(helped) - set(page)) == [], \
        "in --help, not in powerfs-report.1"
    assert sorted(set(page) - set(helped)) == [], \
        "in powerfs-report.1, not in --help"
    differ = {o for o in page if page[o] != helped[o]}
    assert not differ, f"take a value in one and not the other: {differ}"


def references(page):
    """(what, where) for every "see X" of the page: X in bold, one
    reference or a page name."""
    text = plain_keep_bold(source(page))
    return re.findall(r"\b[Ss]ee\s+(?:also\s+)?\\fB(.+?)\\fR(\(\d\))?", text)


def plain_keep_bold(roff):
    """Macros folded into inline bold (\\fB..\\fR), lines joined."""
    out = []
    for line in roff.split("\n"):
        m = re.match(r"^\.(B|BR|BI|RB) (.*)$", line)
        if m:
            args = re.findall(r'"([^"]*)"|(\S+)', m.group(2))
            args = [a or b for a, b in args]
            bold = 0 if m.group(1) in ("B", "BR", "BI") else 1
            parts = [("\\fB%s\\fR" % a) if (i % 2 == bold or
                                             m.group(1) == "B") else a
                     for i, a in enumerate(args)]
            line = "".join(parts) if m.group(1) != "B" else \
                "\\fB%s\\fR" % " ".join(args)
        elif line.startswith("."):
            line = ""
        out.append(line)
    text = " ".join(out)
    text = re.sub(r"\\f[IP]", "\\\\fR", text)
    return text.replace("\\-", "-")


OWN_PAGES = {"powerfs(1)", "powerfs(5)", "powerfs(7)", "powerfs-report(1)"}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_cross_references_name_what_exists(page):
    """"see BACKENDS" must name a heading of the page, "see --journal" an
    option of powerfs(1), "see powerfs(5)" one of the pages: a renamed
    heading otherwise leaves a reference to nothing."""
    heads = sections(page)
    options = set(options_of_page("powerfs.1"))
    refs = references(page)
    if page in ("powerfs.1", "powerfs.7"):
        assert refs, f"{page}: no cross-reference found: the parser is broken"
    bad = []
    for what, manpage in refs:
        what = what.strip()
        if manpage:
            name = what + manpage
            if name.startswith("powerfs") and name not in OWN_PAGES:
                bad.append(name)
        elif what.startswith("-"):
            if what.split("=")[0] not in options:
                bad.append(what)
        elif what not in heads:
            bad.append(what)
    assert not bad, f"{page}: references to nothing: {bad}; headings: {heads}"


def test_pages_name_each_other_and_exist():
    """Every powerfs page named anywhere (in the pages, the documents, the
    unit) is one that make install installs."""
    installed = {"powerfs(1)", "powerfs(5)", "powerfs(7)", "powerfs-report(1)"}
    texts = [plain(source(p)) for p in PAGES]
    for doc in ["README.md", "HACKING.md", "SECURITY.md",
                *sorted(p.relative_to(conftest.REPO)
                        for p in (conftest.REPO / "docs").glob("*.md"))]:
        texts.append((conftest.REPO / doc).read_text())
    texts.append((conftest.REPO / "dist/powerfs.service.in").read_text())
    named = set()
    for t in texts:
        named |= set(re.findall(r"\bpowerfs(?:-report)?\(\d\)", t))
    assert named - installed == set(), named - installed
