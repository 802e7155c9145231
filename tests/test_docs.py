"""The README and docs/ stay true: every relative link resolves (file and anchor), every `cbench`
command in a ```bash or ```console block parses against the click command tree (its options
exist, its choices are valid, `--help` at its place exits 0), docs/cli.md is what
docs/gen_cli_reference.py writes, the README stays short with its figure, and no build history
(which belongs in CHANGELOG.md) appears in them."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


# ----------------------------------------------------------------------------- markdown parsing
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")


def _blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """Fenced code blocks: (language, first line number, lines)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start, body = m.group(2), m.group(3).lower(), i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence[:3]):
            body.append(lines[i])
            i += 1
        out.append((lang, start + 1, body))
        i += 1
    return out


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    kept, inside = [], None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m and inside is None:
            inside = m.group(2)[:3]
            continue
        if inside is not None:
            if line.strip().startswith(inside):
                inside = None
            continue
        kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = _slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _links(path: Path) -> list[str]:
    return _LINK.findall(_prose(path.read_text(encoding="utf-8")))


# ----------------------------------------------------------------------------- links and figure
@pytest.mark.parametrize("page", _pages(), ids=_rel)
def test_relative_links_resolve(page):
    bad = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor} in {_rel(dest)}")
    assert not bad, f"{_rel(page)}: broken links:\n" + "\n".join(bad)


def test_link_checker_finds_broken_links(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n## A section\n\n[ok](#a-section) [gone](#nope) [file](missing.md)\n"
                    "```bash\n[not a link](inside-code.md)\n```\n", encoding="utf-8")
    assert _anchors(page) == {"top", "a-section"}
    assert _links(page) == ["#a-section", "#nope", "missing.md"]


@pytest.mark.parametrize("page", _pages(), ids=_rel)
def test_code_fences_are_closed(page):
    opened = [i for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if _FENCE.match(line)]
    assert len(opened) % 2 == 0, f"{_rel(page)}: a code fence is not closed (fence lines {opened})"


def test_every_docs_page_is_in_the_index():
    linked = {t.partition("#")[0] for t in _links(DOCS / "index.md")}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.name != "index.md" and p.name not in linked]
    assert not missing, f"docs/index.md does not link {missing}"


def test_readme_is_short_and_has_its_figure():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, f"README.md has {len(text.splitlines())} lines (at most 200)"
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    assert images, "README.md has no figure"
    for img in images:
        data = (ROOT / img).read_bytes()
        is_png = data.startswith(b"\x89PNG\r\n\x1a\n")
        is_svg = data.lstrip().startswith(b"<svg") and data.rstrip().endswith(b"</svg>")
        assert (is_png or is_svg) and len(data) > 5_000, img


_HISTORY = re.compile(r"\bsessions? \d|\bissues? #?\d+|\bwave \d", re.IGNORECASE)


@pytest.mark.parametrize("page", _pages(), ids=_rel)
def test_no_build_history(page):
    hits = [f"{i}: {line.strip()}" for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            if _HISTORY.search(line)]
    assert not hits, f"{_rel(page)} tells build history (it belongs in CHANGELOG.md):\n" + "\n".join(hits)


# ----------------------------------------------------------------------------- the CLI reference
def test_cli_reference_is_current():
    from importlib import metadata

    plugins = [ep.name for group in ("cbench.methods", "cbench.commands")
               for ep in metadata.entry_points(group=group) if ep.value.split(".")[0] not in ("cbench", "cbench_builders")]
    if plugins:  # their commands and method names would show in the reference
        pytest.skip(f"third-party cbench plugins installed: {plugins}")
    sys.path.insert(0, str(DOCS))
    try:
        import gen_cli_reference
    finally:
        sys.path.remove(str(DOCS))
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == gen_cli_reference.render(), (
        "docs/cli.md is out of date: run .venv/bin/python docs/gen_cli_reference.py")


# ----------------------------------------------------------------------------- commands in the docs
_SEPARATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "<<", "(", ")"}


def _command_lines(lang: str, body: list[str]) -> list[str]:
    """Shell command lines of a block: ```console keeps `$ ` lines, ```bash every line."""
    joined, buf = [], ""
    for line in body:
        if lang == "console":
            if buf:
                pass
            elif line.lstrip().startswith("$ "):
                line = line.lstrip()[2:]
            else:
                continue
        buf += line.rstrip()
        if buf.endswith("\\"):
            buf = buf[:-1] + " "
            continue
        joined.append(buf.strip())
        buf = ""
    if buf:
        joined.append(buf.strip())
    return [ln for ln in joined if ln and not ln.startswith("#")]


def cbench_invocations(line: str) -> list[list[str]]:
    """The argument lists of every `cbench` command on a shell line (placeholders like <sha> and
    optional groups like [--type dataset] as plain words)."""
    line = re.sub(r"<([^<>\s]+)>", r"\1", line)
    line = re.sub(r"\[(-[^\]]*)\]", r"\1", line)
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    tokens = list(lex)
    out, segment = [], []
    for tok in tokens + [";"]:
        if tok in _SEPARATORS:
            while segment and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", segment[0]) or segment[0] in ("time", "exec")):
                segment = segment[1:]
            if segment and segment[0] == "nice":
                segment = segment[3:] if len(segment) > 2 and segment[1] == "-n" else segment[1:]
            if segment and Path(segment[0]).name == "cbench":
                out.append(segment[1:])
            segment = []
        else:
            segment.append(tok)
    return out


def declared_methods(text: str) -> set[str]:
    """Discovery methods a page defines itself (``cbench.register_method("name", ...)`` or a
    ``cbench.methods`` entry point ``name = "module:function"``): its commands may name them."""
    names = set(re.findall(r"register_method\(\s*[\"']([^\"']+)[\"']", text))
    names |= set(re.findall(r"^([\w.-]+)\s*=\s*\"[\w.]+:[\w.]+\"\s*$", text, re.MULTILINE))
    return names


def _doc_commands() -> list[tuple[str, list[str], set[str]]]:
    found = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        own = declared_methods(text)
        for lang, start, body in _blocks(text):
            if lang not in ("bash", "sh", "shell", "console"):
                continue
            for line in _command_lines(lang, body):
                for args in cbench_invocations(line):
                    found.append((f"{_rel(page)}:{start}: cbench {' '.join(args)}", args, own))
    return found


def check_invocation(args: list[str], own_methods: set[str] = frozenset()) -> list[str]:
    """Problems with ``cbench ARGS`` against the command tree (empty when it parses); choices of
    ``--method`` may also be ``own_methods``, methods the page itself registers."""
    from cbench.cli import cli

    cmd, path, rest = cli, [], list(args)
    ctx = click.Context(cli, info_name="cbench")
    while isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            return [f"no command {' '.join(['cbench', *path, rest[0]])!r}"]
        path.append(rest.pop(0))
        cmd = sub
        ctx = click.Context(cmd, info_name=path[-1], parent=ctx)
    problems = []
    if isinstance(cmd, click.Group) and rest:
        problems.append(f"{' '.join(['cbench', *path])} is a group; {rest[0]!r} is not one of its commands")
    options = {name: p for p in cmd.params if isinstance(p, click.Option) for name in (*p.opts, *p.secondary_opts)}
    i = 0
    while i < len(rest):
        tok = rest[i]
        i += 1
        if tok == "--":
            break
        if not tok.startswith("-") or tok == "-" or re.match(r"^-\d", tok):
            continue
        name, eq, value = tok.partition("=")
        opt = options.get(name)
        if opt is None:
            problems.append(f"{' '.join(['cbench', *path])}: no option {name}")
            continue
        if opt.is_flag or opt.count:
            continue
        if not eq:
            if i >= len(rest):
                problems.append(f"{name} needs a value")
                continue
            value = rest[i]
            i += 1
        if not isinstance(opt.type, click.Choice) or value.isupper():  # an upper-case placeholder
            continue
        allowed = [*opt.type.choices, *(own_methods if "--method" in opt.opts else ())]
        if value not in allowed:
            problems.append(f"{name} {value!r} is not one of {list(allowed)}")
    result = CliRunner().invoke(cli, [*path, "--help", *rest])
    if result.exit_code != 0:
        problems.append(f"`--help` exits {result.exit_code}: {(result.output or '').strip()[-300:]}")
    return problems


def test_docs_contain_commands():
    labels = [label for label, _, _ in _doc_commands()]
    assert len(labels) >= 40, labels
    assert any(label.startswith("README.md:") for label in labels)


def test_every_documented_command_parses():
    bad = []
    for label, args, own in _doc_commands():
        bad += [f"{label}\n    {p}" for p in check_invocation(args, own)]
    assert not bad, "commands in README/docs that do not parse:\n" + "\n".join(bad)


def test_command_check_catches_mistakes():
    assert cbench_invocations('CBENCH_THREADS=1 nice -n 15 cbench build ioi-model --time-limit 3400') == [
        ["build", "ioi-model", "--time-limit", "3400"]]
    assert cbench_invocations('cbench validate s.json --case "$(cbench pull case-3 | tail -1)" | jq .x') == [
        ["validate", "s.json", "--case", "$(cbench pull case-3 | tail -1)"]]
    assert cbench_invocations("cbench pull cbench/case-3@<sha>   # a comment") == [["pull", "cbench/case-3@sha"]]
    assert check_invocation(["discover", "case-3", "--method", "eap", "--out", "scores.json"]) == []
    assert check_invocation(["find", "call", "n0042", "--", "-3", "0"]) == []
    unknown = check_invocation(["discover", "case-3", "--methd", "eap"])
    assert unknown[0] == "cbench discover: no option --methd" and "exits 2" in unknown[1]
    assert check_invocation(["discover", "case-3", "--method", "nope"])[0].startswith("--method 'nope' is not one of")
    page = 'cbench.register_method("mine", f)\n```toml\ntheirs = "pkg.mod:fn"\n```\n'
    assert declared_methods(page) == {"mine", "theirs"}
    assert check_invocation(["discover", "case-3", "--method", "mine"], declared_methods(page)) == []
    assert check_invocation(["pul", "case-3"]) == ["no command 'cbench pul'"]
    assert check_invocation(["hub", "serv"]) == ["no command 'cbench hub serv'"]


def test_license_and_citation_match_the_package():
    import cbench.about

    assert re.search(r'^license = "MIT"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE)
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    cff = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    assert re.search(r"^cff-version: 1\.2\.0$", cff, re.MULTILINE)
    assert re.search(r"^license: MIT$", cff, re.MULTILINE)
    version = re.search(r'^version: "([^"]+)"$', cff, re.MULTILINE)
    assert version and version.group(1) == cbench.about.__version__, (
        "CITATION.cff's version is not cbench.about.__version__")
    assert re.search(r'^  - name: "cbench maintainers"$', cff, re.MULTILINE)
