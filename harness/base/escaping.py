"""Escaping for every language a string from the data reaches, one function per language: HTML (pages,
inline SVG, attributes), a Markdown table cell (GitHub step summaries, merge-request comments), the
terminal (rich tables and lines), XML text (JUnit), the POSIX shell (a word, a command line: batch
scripts, ssh's remote command, a job's command, a command a message tells a user to paste), an
``#SBATCH`` line's argument (sbatch's own reading), and YAML (manifests, dumped, never formatted by
hand). A results table, a scenario file and a host list are input from anyone's CI: none of their
strings may become markup, options, shell syntax, YAML structure or terminal commands.

Each sink calls the function of its own language here and nowhere else, so that a fix for one form lands
everywhere that language is written. Imports nothing of the harness (rich only where the terminal's
markup is escaped, and lazily)."""

from __future__ import annotations

import html as _html
import re
import shlex
from typing import Any, Iterable

# An escape or control sequence a terminal acts on: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST: a
# hidden hyperlink, a window title), DCS/SOS/PM/APC strings, two-character ESC sequences, their C1 forms
# (U+009B CSI, U+009D OSC ...), then any remaining C0 or C1 control and DEL.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"           # CSI
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])"      # OSC, DCS, SOS, PM, APC ...
    r"[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"          # ... up to BEL or ST (or the end)
    r"|\x1b[ -/]*[0-~]?"                               # two-character sequences (ESC c: reset, ESC 7 ...)
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")  # and the line/paragraph separators
_LINE_BREAKS = re.compile(r"[\n\r\u2028\u2029\u0085]")
# XML 1.0 cannot hold these even escaped
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# CommonMark's backslash escapes for the punctuation a cell could use to become emphasis, strike-through,
# a link or image, code or a column break (GitHub reads "\|" in a table cell as a literal bar), and ":" so
# that no "https://" becomes an autolink; < and > are entities already
_MARKDOWN = re.compile(r"([\\`*_\[\]!|~:])")
# what an #SBATCH argument may hold unquoted (sbatch's _get_argument: quotes group, a backslash escapes, '#'
# outside quotes starts a comment, white space ends the argument)
_SBATCH_PLAIN = re.compile(r"[\w@%+=:,./-]+")


def controls(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every terminal escape sequence removed and every other control character (C0, C1,
    DEL, U+2028/9; tab and, with ``keep_newlines``, newline kept) shown as U+FFFD: nothing a terminal would act on."""
    text = _SEQUENCE.sub("\ufffd", str(text))
    if keep_newlines:
        return _CONTROL.sub("\ufffd", text)
    return _CONTROL.sub("\ufffd", text.replace("\n", " "))


def html(text: object, quote: bool = True) -> str:
    """For HTML text and attribute values (quoted with " or '): ``& < > " '`` as entities, control
    characters removed (a page shows no terminal code)."""
    return _html.escape(controls(str(text), keep_newlines=True), quote=quote)


def markdown_cell(text: object) -> str:
    """One cell of a Markdown table, or a list item: on one line, HTML's ``& < >`` as entities (GitHub
    renders inline HTML: an ``<img>`` would be a tracking pixel), Markdown punctuation backslash-escaped
    (no emphasis, link, image, code span or column break)."""
    flat = _LINE_BREAKS.sub(" ", controls(str(text)))
    return _MARKDOWN.sub(r"\\\1", _html.escape(flat, quote=False))


def terminal(text: object) -> str:
    """For a rich console or table: escape sequences and controls removed (no screen clear, no hidden
    hyperlink, no cursor move), newlines kept, and rich's own markup (``[link=...]``) escaped."""
    from rich.markup import escape

    return escape(controls(str(text), keep_newlines=True))


def xml_text(text: object) -> str:
    """Text an XML writer (ElementTree) escapes itself, less the characters XML 1.0 cannot hold at all
    (terminal codes in a log line a reason quotes) and every escape sequence."""
    return _NOT_XML.sub("\ufffd", controls(str(text), keep_newlines=True))


def shell_word(text: object) -> str:
    """One word of a POSIX shell command line, whatever it holds (``shlex.quote``: single quotes, a ``'``
    as ``'"'"'``): no expansion, no second command, no redirection, a newline kept inside the word."""
    return shlex.quote(str(text))


def shell_line(argv: Iterable[object]) -> str:
    """A command line a shell reads back as exactly ``argv`` (each word :func:`shell_word`): for a batch
    script, ssh's remote command, a command printed or written for a user to paste."""
    return " ".join(shell_word(a) for a in argv)


class LineBreak(ValueError):
    """A value that would end its line where the language reads one line (an #SBATCH argument): it
    cannot be written there at all."""


def sbatch_argument(text: object) -> str:
    """``text`` as one argument of an ``#SBATCH`` line, as sbatch reads them (src/sbatch/opt.c,
    _get_argument: quotes group, a backslash escapes the next character even inside quotes, '#' outside
    quotes starts a comment): plain text as it is, anything else in double quotes with backslash and quote
    escaped. A line break cannot be written (the rest would be the script's next line, run by the shell):
    :class:`LineBreak`."""
    value = str(text)
    if _LINE_BREAKS.search(value) or "\x00" in value:
        raise LineBreak("holds a line break (or NUL), which cannot be part of an #SBATCH line")
    if _SBATCH_PLAIN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def yaml_document(data: Any) -> str:
    """``data`` (dicts, lists, strings, numbers) as a YAML document that loads back as ``data``: dumped
    (``yaml.safe_dump``, keys in their order), never formatted by hand, so no string becomes a key, a list,
    an anchor, a tag or a second document."""
    import yaml

    return yaml.safe_dump(data, sort_keys=False)
