"""Every relative link of README.md and docs/*.md points to a file of the repository and,
where it names an anchor (`page.md#section`), to a heading of that page, spelled as
GitHub spells its anchors: a page that moves a section cannot leave a dead link behind."""

import re
from pathlib import Path

import pytest

from tests.doc_blocks import FENCE, ROOT, doc_pages

LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
EXTERNAL = ("http://", "https://", "mailto:")


def prose(path: Path) -> str:
    """The page without its code blocks and code spans (a link inside code is not a link)."""
    return CODE_SPAN.sub("", FENCE.sub("", path.read_text()))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup gone, lower case, punctuation dropped, spaces
    to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set:
    """The anchors of a page's headings; a repeated heading's get -1, -2, ... as on GitHub."""
    seen, found = {}, set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_slug_spells_anchors_as_github_does():
    assert slug("Ours and PyTorch DDP / FSDP2 on the same ranks") == \
        "ours-and-pytorch-ddp--fsdp2-on-the-same-ranks"
    assert slug("The executor's per-task cost") == "the-executors-per-task-cost"
    assert slug("`nt.autoplan` and HSDP") == "ntautoplan-and-hsdp"


@pytest.mark.parametrize("page", doc_pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(prose(page)):
        if target.startswith(EXTERNAL):
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT)}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
