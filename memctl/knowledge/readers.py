"""Readers for knowledge files: bytes in, text chunks (with per-chunk metadata) out.

Each reader gets the file's bytes (read once by the caller, who also checksums them) and the
chunk size and overlap in characters. A file that cannot be read raises `UnreadableFile` with a
reason a person can act on; the caller keeps that file's previous chunks.

- .txt: plain UTF-8 text, split by size (paragraphs, then lines, sentences, words).
- .md: split at headings (ATX `#` and setext underlines, not inside code fences), then by size;
  each chunk records its section `heading`.
- .json: a top-level list gives one chunk per element (`row`, 1-based); anything else is one
  document. Objects read as `key: value` lines. .jsonl: one chunk per line (`row` = line number).
- .csv: one chunk per data row (`row`, 1-based), each cell labelled with its header.
- .html: visible text only (script, style, noscript and template dropped); `title` kept.
- .pdf: text per page through pypdf (`page`, 1-based).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from memctl.errors import InputFormatError

# Finer and finer places to cut a text that is too long for one chunk.
SEPARATORS = ("\n\n", "\n", ". ", " ")


class UnreadableFile(InputFormatError):
    """A knowledge file could not be read (bad encoding, invalid JSON, broken PDF ...)."""


@dataclass
class Chunk:
    text: str
    meta: dict[str, Any] = field(default_factory=dict)


# -- splitting by size -------------------------------------------------------------------
def split_text(text: str, size: int, overlap: int) -> list[str]:
    """Cut text into chunks of at most `size` characters, preferring paragraph and line breaks.

    Each chunk after the first starts with up to `overlap` characters from the end of the one
    before (cut at a word boundary), so a sentence on a border is found from both sides.
    """
    text = _tidy(text)
    if not text:
        return []
    if len(text) <= size:
        return [text]
    overlap = max(0, min(overlap, size // 2))
    chunks: list[str] = []
    current, fresh = "", False  # fresh: current holds more than the overlap carried over
    for unit in _units(text, size - overlap, SEPARATORS):
        if len(current) + len(unit) > size:
            if fresh:
                chunks.append(current.strip())
                current, fresh = _tail(current, overlap), False
            if len(current) + len(unit) > size:  # whitespace units pushed the overlap over: shorten it
                current = current[len(current) + len(unit) - size :].lstrip()
        current += unit
        fresh = fresh or bool(unit.strip())
    if fresh:
        chunks.append(current.strip())
    return chunks


def _tidy(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _units(text: str, limit: int, separators: tuple[str, ...]) -> list[str]:
    """Pieces of at most `limit` characters that concatenate back to `text`."""
    if len(text) <= limit:
        return [text]
    for i, sep in enumerate(separators):
        if sep in text:
            parts = [p + sep for p in text.split(sep)]
            parts[-1] = parts[-1][: -len(sep)]
            units: list[str] = []
            for part in parts:
                units += _units(part, limit, separators[i + 1 :]) if len(part) > limit else [part]
            return [u for u in units if u]
    return [text[start : start + limit] for start in range(0, len(text), limit)]


def _tail(chunk: str, overlap: int) -> str:
    if overlap <= 0:
        return ""
    tail = chunk[-overlap:]
    if len(chunk) > overlap and not chunk[-overlap - 1].isspace():
        cut = re.search(r"\s", tail)
        tail = tail[cut.end() :] if cut else ""
    return tail.lstrip()


def _chunks(text: str, size: int, overlap: int, **meta: Any) -> list[Chunk]:
    return [Chunk(piece, dict(meta)) for piece in split_text(text, size, overlap)]


# -- decoding ----------------------------------------------------------------------------
def decode_utf8(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", hint="convert the file to UTF-8"
        ) from exc
    if "\x00" in text:
        raise UnreadableFile("looks like a binary file (it contains NUL bytes)")
    return text


# -- readers -----------------------------------------------------------------------------
def read_txt(data: bytes, size: int, overlap: int) -> list[Chunk]:
    return _chunks(decode_utf8(data), size, overlap)


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")


def markdown_sections(text: str) -> list[tuple[str | None, str]]:
    """(heading, section text including its heading line) in document order.

    A heading with no text of its own (a title right above a sub-heading) travels with the next section.
    """
    sections: list[tuple[str | None, list[str], int]] = [(None, [], 0)]  # heading, lines, heading lines
    fence: str | None = None
    lines = _tidy(text).split("\n")
    for i, line in enumerate(lines):
        opener = _FENCE.match(line)
        if opener and fence is None:
            fence = opener.group(1)
        elif opener and opener.group(1) == fence:
            fence = None
        elif fence is None:
            atx = _ATX.match(line)
            after_blank = i == 0 or not lines[i - 1].strip()
            if atx:
                sections.append((atx.group(2), [], 1))
            elif (
                after_blank
                and line.strip()
                and i + 1 < len(lines)
                and _SETEXT.match(lines[i + 1])
                and not _SETEXT.match(line)
            ):
                sections.append((line.strip(), [], 2))
        sections[-1][1].append(line)
    merged: list[tuple[str | None, str]] = []
    carry = ""
    for heading, body, heading_lines in sections:
        section = "\n".join(body).strip()
        if not section:
            continue
        if heading is not None and not "".join(body[heading_lines:]).strip():
            carry += section + "\n\n"
            continue
        merged.append((heading, carry + section))
        carry = ""
    if carry.strip():
        merged.append((None, carry.strip()))
    return merged


def read_md(data: bytes, size: int, overlap: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    for heading, section in markdown_sections(decode_utf8(data)):
        chunks += _chunks(section, size, overlap, **({"heading": heading} if heading else {}))
    return chunks


def _render(value: Any) -> str:
    """A JSON value as text to embed: strings as they are, objects as `key: value` lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            shown = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
            lines.append(f"{key}: {shown}")
        return "\n".join(lines)
    return json.dumps(value, ensure_ascii=False)


def read_json(data: bytes, size: int, overlap: int) -> list[Chunk]:
    text = decode_utf8(data)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UnreadableFile(f"invalid JSON: {exc}") from exc
    if not isinstance(value, list):
        return _chunks(_render(value), size, overlap)
    chunks: list[Chunk] = []
    for row, item in enumerate(value, start=1):
        chunks += _chunks(_render(item), size, overlap, row=row)
    return chunks


def read_jsonl(data: bytes, size: int, overlap: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    for row, line in enumerate(decode_utf8(data).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise UnreadableFile(f"invalid JSON on line {row}: {exc}") from exc
        chunks += _chunks(_render(value), size, overlap, row=row)
    return chunks


def read_csv(data: bytes, size: int, overlap: int) -> list[Chunk]:
    text = decode_utf8(data)
    try:
        dialect: Any = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), dialect))
    except csv.Error as exc:
        raise UnreadableFile(f"invalid CSV: {exc}") from exc
    if not rows:
        return []
    header = [h.strip() or f"column {i + 1}" for i, h in enumerate(rows[0])]
    chunks: list[Chunk] = []
    for number, row in enumerate(rows[1:], start=1):
        cells = [(header[i] if i < len(header) else f"column {i + 1}", v.strip()) for i, v in enumerate(row)]
        body = "\n".join(f"{name}: {value}" for name, value in cells if value)
        chunks += _chunks(body, size, overlap, row=number)
    return chunks


class _TextOfHtml(HTMLParser):
    SKIP = frozenset({"script", "style", "noscript", "template"})
    BLOCK = frozenset(
        {
            "p",
            "div",
            "br",
            "li",
            "tr",
            "td",
            "th",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "section",
            "article",
            "header",
            "footer",
            "pre",
            "table",
            "ul",
            "ol",
            "dl",
            "dt",
            "dd",
            "blockquote",
            "hr",
            "title",
            "main",
            "nav",
            "aside",
            "figure",
            "figcaption",
            "caption",
            "form",
        }
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.pre = 0
        self.in_title = False
        self.title = ""

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self.SKIP:
            self.skipping += 1
        elif tag == "pre":
            self.pre += 1
        if tag == "title":
            self.in_title = True
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag == "title":
            self.in_title = False
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        if self.in_title:
            self.title += data
        if not self.pre:
            data = re.sub(r"\s+", " ", data)
            if not self.parts or self.parts[-1].endswith("\n"):
                data = data.lstrip()
        self.parts.append(data)

    def text(self) -> str:
        lines = (line.rstrip() for line in "".join(self.parts).split("\n"))
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines))


_CHARSET = re.compile(rb"""charset\s*=\s*["']?([A-Za-z0-9._:-]+)""", re.IGNORECASE)


def _decode_html(data: bytes) -> str:
    try:
        return decode_utf8(data)
    except UnreadableFile:
        declared = _CHARSET.search(data[:4096])
        if not declared:
            raise
        name = declared.group(1).decode("ascii")
        try:
            codecs.lookup(name)
            return data.decode(name)
        except (LookupError, UnicodeDecodeError) as exc:
            raise UnreadableFile(f"cannot decode as its declared charset {name!r}: {exc}") from exc


def read_html(data: bytes, size: int, overlap: int) -> list[Chunk]:
    parser = _TextOfHtml()
    parser.feed(_decode_html(data))
    parser.close()
    title = " ".join(parser.title.split())
    return _chunks(parser.text(), size, overlap, **({"title": title} if title else {}))


def read_pdf(data: bytes, size: int, overlap: int) -> list[Chunk]:
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # broken files are reported by us, once
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableFile("the PDF is encrypted", hint="save an unencrypted copy")
        pages = [page.extract_text() or "" for page in reader.pages]
    except UnreadableFile:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types for malformed files
        raise UnreadableFile(f"not a readable PDF: {type(exc).__name__}: {exc}") from exc
    chunks: list[Chunk] = []
    for number, text in enumerate(pages, start=1):
        chunks += _chunks(text, size, overlap, page=number)
    return chunks


Reader = Callable[[bytes, int, int], list[Chunk]]
# extension -> (file_type recorded in metadata, reader)
READERS: dict[str, tuple[str, Reader]] = {
    ".txt": ("txt", read_txt),
    ".text": ("txt", read_txt),
    ".md": ("md", read_md),
    ".markdown": ("md", read_md),
    ".json": ("json", read_json),
    ".jsonl": ("jsonl", read_jsonl),
    ".ndjson": ("jsonl", read_jsonl),
    ".csv": ("csv", read_csv),
    ".html": ("html", read_html),
    ".htm": ("html", read_html),
    ".pdf": ("pdf", read_pdf),
}


def reader_for(name: str) -> tuple[str, Reader] | None:
    """(file_type, reader) for a file name, or None for an extension memctl does not read."""
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    return READERS.get(suffix)


def read_chunks(name: str, data: bytes, size: int, overlap: int) -> list[Chunk]:
    found = reader_for(name)
    if found is None:
        raise UnreadableFile(f"no reader for {name!r}")
    try:
        return found[1](data, size, overlap)
    except RecursionError as exc:
        raise UnreadableFile("the file is nested too deeply to read") from exc
