"""Is a calendar word of a statement said, in another form, in a conversation?

An extractor writes what the user said in full: "Tue–Sat 11:00–19:00" becomes "open Tuesday to Saturday,
11am to 7pm", "next January" becomes "January 2027", a dated file name becomes a `YYYY-MM-DD` pattern. The
grounding check (memctl.memorize.grounding) asks whether a statement's names and numbers occur in what the
user or a tool said; these are the same names and numbers written another way, so it reads them through
here rather than calling them inventions.
"""

from __future__ import annotations

import calendar
import re

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_CJK_NUMBERS = "一二三四五六七八九十"
_CJK_WEEKDAYS = "一二三四五六日"
# "next year", "明年": a year the extractor may write out as a number.
_RELATIVE_YEAR = re.compile(r"\b(?:next|last|this|coming|following)\s+year\b|明年|今年|去年|后年|前年|年底|年初")
_TIME = re.compile(r"(\d{1,2})(?:[.:](\d{2}))?\s*(am|pm)")
_YEAR = re.compile(r"(?:19|20)\d{2}")
# A placeholder of a date or time pattern ("YYYY-MM-DD", "HH:MM"): a template, not a claim.
_PLACEHOLDER = re.compile(r"(?:yyyy|yy|mm|dd|hh|ss)(?:[-_:./](?:yyyy|yy|mm|dd|hh|ss))*")


def said_otherwise(word: str, evidence: str) -> bool:
    """True when `word` (lower-case, one token of a statement) is a month, weekday, clock time, year or date
    placeholder that `evidence` (lower-case) says in another common form."""
    if _PLACEHOLDER.fullmatch(word):
        return True
    if word in _MONTHS:
        return _month_said(_MONTHS[word], word, evidence)
    if word in _WEEKDAYS:
        day = _WEEKDAYS[word]
        forms = (rf"\b{word[:3]}", f"周{_CJK_WEEKDAYS[day]}", f"星期{_CJK_WEEKDAYS[day]}")
        return any(re.search(form, evidence) for form in forms)
    time = _TIME.fullmatch(word)
    if time:
        return _time_said(int(time.group(1)), time.group(2) or "", time.group(3), evidence)
    if _YEAR.fullmatch(word):
        year = int(word)
        near = {int(y) for y in re.findall(r"(?<!\d)((?:19|20)\d{2})(?!\d)", evidence)}
        return bool(near & {year - 1, year, year + 1}) or bool(_RELATIVE_YEAR.search(evidence))
    return False


def _month_said(month: int, name: str, evidence: str) -> bool:
    if re.search(rf"\b{name[:3]}", evidence):
        return True  # "Oct", "Sept"
    cjk = _CJK_NUMBERS[month - 1] if month <= 10 else "十" + _CJK_NUMBERS[month - 11]
    if re.search(rf"(?<!\d){month}\s*月|{cjk}月", evidence):
        return True
    return bool(re.search(rf"\b\d{{4}}-{month:02d}-\d{{2}}(?!\d)|\b\d{{1,2}}/{month:02d}/\d{{2,4}}\b", evidence))


def _time_said(hour: int, minute: str, half: str, evidence: str) -> bool:
    """ "3.45pm" ~ "15:45", "3:45", "下午3点45"; "7pm" ~ "19:00", "7 pm", "19点"."""
    if not 1 <= hour <= 12:
        return False
    clock = hour % 12 + (12 if half == "pm" else 0)
    hours = {hour, clock}
    for h in hours:
        if minute and re.search(rf"(?<!\d){h}[.:h]{minute}(?!\d)|(?<!\d){h}点{int(minute)}", evidence):
            return True
        if not minute and re.search(rf"(?<!\d){h}(?::00|\.00|h00|\s*(?:am|pm|点|時|时)|\s*-|–)", evidence):
            return True
    return False
