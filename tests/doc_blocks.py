"""The fenced code blocks of README.md and docs/*.md, each with the HTML comment on the line
before it (its marker: how a test runs it, or why it is not run), for the tests that run
the docs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\n(?P<code>.*?)\n(?P=indent)```\s*$",
                   re.S | re.M)
MARKER = re.compile(r"<!--\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str       # relative to the repository root
    line: int       # of the opening fence, 1-based
    lang: str       # "" for a bare fence
    indent: int     # spaces before the fence: a block inside a list item
    marker: str     # the comment on the line before the fence, "" if none
    code: str

    @property
    def first_line(self) -> str:
        return self.code.strip().splitlines()[0].strip() if self.code.strip() else ""

    def __str__(self):
        return f"{self.page}:{self.line} ({self.lang or 'bare'}: {self.first_line[:60]!r})"


def doc_pages() -> list:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def page_blocks(path: Path) -> list:
    """Every fenced block of one page, in page order."""
    text = path.read_text()
    blocks = []
    for found in FENCE.finditer(text):
        before = text[:found.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        blocks.append(Block(str(path.relative_to(ROOT)), text.count("\n", 0, found.start()) + 1,
                            found["lang"], len(found["indent"]),
                            marker.group(1) if marker else "", found["code"]))
    return blocks


def all_blocks() -> list:
    return [block for page in doc_pages() for block in page_blocks(page)]
