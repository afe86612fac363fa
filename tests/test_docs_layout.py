"""The README is a new user's map, so it must stay short and true: its Layout section names the
design card's top-level folders and only paths that exist, its links into docs/ resolve, its
exit-status and option tables agree with the commands.  Everything is read from the README
itself (the Layout section, the links, the tables), so moving a module means editing the
README's section, never this file."""

import re
import subprocess
from pathlib import Path

import pytest

from nnconform.cli import main

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"

# The design card's top-level layout: what the README's Layout section must always name.
DESIGN_TOP_LEVEL = (
    "pyproject.toml",
    "conftest.py",
    "harness/",
    "drivers/",
    "generators/",
    "suites/",
    "reports/",
    "tests/",
    "docs/",
    "benchmarks/",
)
MAX_README_LINES = 300


def section(text: str, title: str) -> str:
    """The body of the `## title` section (up to the next `## ` heading)."""
    head = f"\n## {title}\n"
    assert head in text, f"README has no '## {title}' section"
    return text.split(head, 1)[1].split("\n## ", 1)[0]


def layout_paths() -> list[str]:
    """The paths the Layout section names: the first word of each unindented line of its code
    block (indented lines continue the description above them)."""
    block = re.search(r"```\n(.*?)```", section(README.read_text(), "Layout"), re.S)
    assert block, "the Layout section has no code block"
    return [line.split()[0] for line in block.group(1).splitlines() if line and not line[0].isspace()]


def between(text: str, name: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    assert begin in text and end in text, f"README lacks the {name} markers"
    return text.split(begin, 1)[1].split(end, 1)[0]


def table_rows(block: str) -> list[list[str]]:
    """The cells of a markdown table's body rows (header and rule skipped)."""
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in block.splitlines()
        if line.strip().startswith("|")
    ]
    return rows[2:]


def test_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n < MAX_README_LINES, f"README has {n} lines; move detail into docs/ (limit {MAX_README_LINES})"


def test_layout_names_every_top_level_folder_of_the_design_card():
    named = set(layout_paths())
    missing = [p for p in DESIGN_TOP_LEVEL if p not in named]
    assert not missing, f"README Layout does not name {missing}"


def test_every_path_the_layout_names_exists():
    paths = layout_paths()
    assert len(paths) >= len(DESIGN_TOP_LEVEL)
    for p in paths:
        target = REPO / p
        assert target.is_dir() if p.endswith("/") else target.is_file(), f"README Layout names {p}, which is not there"


def test_layout_names_every_tracked_top_level_folder():
    """A folder added to the repository shows up in the README's map too."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        pytest.skip("git is not installed")
    if out.returncode != 0:
        pytest.skip("not a git checkout: " + out.stderr.strip()[:100])
    folders = {f.split("/", 1)[0] + "/" for f in out.stdout.splitlines() if "/" in f and not f.startswith(".")}
    assert folders, "git lists no folders"
    missing = sorted(folders - set(layout_paths()))
    assert not missing, f"README Layout does not name {missing}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # a '#' in code is no heading
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def _links(path: Path) -> list[tuple[Path, str]]:
    """(target file, anchor) of every relative markdown link to a .md file in ``path``."""
    out = []
    for target, anchor in re.findall(r"\]\(([^)\s#]+\.md)(?:#([^)\s]+))?\)", path.read_text()):
        if "://" not in target:
            out.append(((path.parent / target).resolve(), anchor))
    return out


def test_readme_links_into_docs_resolve_and_reach_every_guide():
    text = README.read_text()
    mentioned = set(re.findall(r"\bdocs/[\w.-]+\.md\b", text))
    assert mentioned, "README links to no guide in docs/"
    for name in sorted(mentioned):
        assert (REPO / name).is_file(), f"README names {name}, which does not exist"
    linked = {t for t, _ in _links(README)}
    orphans = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert not orphans, f"docs/ pages the README does not link: {orphans}"


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_links_between_documents_resolve(page):
    """Every link from one document to another (and to a heading in it) leads somewhere."""
    for target, anchor in _links(page):
        assert target.is_file(), f"{page.name} links to {target}, which does not exist"
        if anchor:
            assert anchor in _anchors(target), f"{page.name} links to {target.name}#{anchor}: no such heading"


def test_exit_status_table_has_the_four_statuses():
    rows = table_rows(between(README.read_text(), "exit-status"))
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]
    assert all(r[1] for r in rows), "an exit status without its meaning"


def _help(command: str, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main([*command.split(), "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def test_shared_options_table_matches_the_commands_and_the_plugin(capsys, pytestconfig):
    """Each option of the table is accepted by every command its row names, and its pytest
    spelling is an option of the plugin."""
    rows = table_rows(between(README.read_text(), "options"))
    assert len(rows) >= 8
    helps: dict[str, str] = {}
    for option, commands, meaning, plugin in rows:
        opt = re.fullmatch(r"`(--[\w-]+)`", option)
        assert opt, f"options table: {option!r} is not one `--option`"
        assert meaning, f"{option} has no meaning"
        for command in (c.strip() for c in commands.split(",")):
            if command not in helps:
                helps[command] = _help(command, capsys)
            assert re.search(re.escape(opt.group(1)) + r"(?![\w-])", helps[command]), (
                f"README says `nnconform {command}` takes {opt.group(1)}; its --help does not list it"
            )
        if plugin:
            name = re.fullmatch(r"`(--[\w-]+)`", plugin)
            assert name, f"options table: pytest spelling {plugin!r} is not one `--option`"
            pytestconfig.getoption(name.group(1))  # pytest raises for an option it does not know


def test_readme_options_table_is_the_option_table_of_the_code():
    """The README's shared-options table is generated from nnconform.cli.options: regenerate it
    (``python -c 'from nnconform.cli.options import options_table_markdown as t; print(t())'``)
    when an option changes."""
    from nnconform.cli.options import options_table_markdown

    assert between(README.read_text(), "options").strip() == options_table_markdown().strip()


def test_layout_names_every_layer_of_the_package():
    """Each sub-package of harness/ (a layer) has its line in the Layout section."""
    named = set(layout_paths())
    layers = sorted(p.parent.name for p in (REPO / "harness").glob("*/__init__.py"))
    assert layers, "harness/ has no sub-packages"
    missing = [
        f"harness/{name}/" for name in layers if f"harness/{name}/" not in named and f"harness/{name}" not in named
    ]
    assert not missing, f"the README's Layout section does not name {missing}"
