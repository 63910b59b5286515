"""Read a tool's description and parameter descriptions from a Google-style docstring."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class ParsedDocstring:
    """A docstring split into the parts a tool schema uses.

    Args:
        summary: the first paragraph, its lines joined with single spaces.
        args: parameter name to description, from the `Args:` section.
    """

    summary: str
    args: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split a cleaned (`inspect.getdoc`) Google-style docstring.

    Args:
        doc: the docstring, or None.

    Returns:
        The summary paragraph and the `Args:` descriptions (continuation lines joined).
    """
    if not doc:
        return ParsedDocstring(summary="")
    lines = doc.splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        summary_lines.append(line.strip())
    args: dict[str, str] = {}
    in_args = False
    base_indent = 0
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        section = _SECTION.match(stripped) if indent == 0 else None
        if section is not None:
            in_args = section.group(1) in ("Args", "Arguments", "Parameters")
            current = None
            base_indent = 0
            continue
        if not in_args or not stripped:
            continue
        if indent == 0:
            in_args = False
            continue
        if base_indent == 0:
            base_indent = indent
        match = _ARG_LINE.match(stripped)
        if indent == base_indent and match is not None:
            current = match.group(1).lstrip("*")
            args[current] = match.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {stripped}".strip()
    return ParsedDocstring(summary=" ".join(summary_lines), args=args)
