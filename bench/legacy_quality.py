"""The quality gate as it was on main before the tune-half rules.

A frozen copy: bench/quality_gate.py shows it side by side with the current gate.


An extractor, however well prompted, proposes things that do not belong in long-term memory:
what happened in this session (agent actions, command output, test counts), what holds only
now (dates, tonight's plan, a reminder id), where things are on one machine (localhost, ports,
home folders), and things it made up or merely repeated from what memctl itself recalled.
Each rule below names one such kind; a rejected candidate carries that name as its `reason`.

Rules are about the *form* of a statement, not about particular strings, so they carry over to
transcripts the rules were never tuned on. Grounding (is the candidate supported by what the
user or a tool actually said?) needs the transcript and is done by `Grounding`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from memctl.transcripts import Message

# reason -> what it means (shown by `memctl memorize` and documented in the README).
REASONS: dict[str, str] = {
    "too_short": "too short to be a fact",
    "too_long": "too long for one memory (a summary or a dump, not a fact)",
    "bare_topic": "a topic or label, not a statement",
    "greeting": "greeting or small talk",
    "date_only": "only says what day or date it is",
    "agent_action": "what the agent did in this session",
    "past_event": "a one-time event of the session, not a standing fact",
    "command_output": "command or test output, logs, errors, timings",
    "calculation": "a conversion or computed value, not about the user",
    "local_coordinate": "machine-local: localhost, ports, private IPs, home/temp/container paths, file lines",
    "ephemeral_id": "a generated id (reminder, ticket, booking, commit, task)",
    "temporary": "holds only for now: today, tonight, this week, a deadline, a passing state",
    "one_off_request": "a one-off request or plan, not a lasting preference",
    "ungrounded": "not supported by anything the user or a tool said in the transcript",
    "echo": "only restates a memory that memctl recalled into the conversation",
}

MAX_FRAGMENT_CHARS = 600
MAX_SOLUTION_CHARS = 2000
_WORD = re.compile(r"[^\W_](?:[\w'’.\-/@:+]*[^\W_])?", re.UNICODE)
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)

# --- individual rules: each returns a short detail (what matched) or None -------------------------

_GREETING = re.compile(
    r"^\s*(hi+|hello|hey|good (morning|afternoon|evening|night)|thanks?( you)?|thank you|bye|goodbye|cheers|"
    r"see you|you'?re welcome|ok(ay)?|great|perfect)\b[\s!.,:;)\-]*\w{0,12}[\s!.]*$"
    r"|\b(greet(s|ed|ing)?|said (hi|hello|hey|bye|goodbye|thanks)|thank(s|ed) the (assistant|agent)|"
    r"small talk|asked how (its|the assistant'?s|the agent'?s|your) day)\b",
    re.IGNORECASE,
)

_DATE_ONLY = re.compile(
    rf"^\s*(today|tomorrow|yesterday|tonight|the (current )?date|the day|it)\s*('s|’s| is| was| will be)\s+"
    rf"((a|the)\s+)?({_WEEKDAYS}|{_MONTHS}|\d|\s|,|\.|-|/|of|the|st|nd|rd|th)+$",
    re.IGNORECASE,
)

_AGENT_SUBJECT = re.compile(
    r"^\s*(the\s+)?(agent|assistant|ai|bot|model|llm|chatbot|i|we|memctl|it|claude|gpt)\s+(has\s+|have\s+|had\s+|"
    r"then\s+|also\s+|just\s+|successfully\s+|first\s+)*(\w+ed|ran|wrote|made|built|set|put|did|sent|found|gave|"
    r"took|got|read|kept|began|chose|brought|told|showed|shown|done|run|written|searched|fixed|tried)\b",
    re.IGNORECASE,
)
# A text that opens with a past-tense verb and no subject: "Created /tmp/x", "Ran the tests".
_VERB_FIRST = re.compile(
    r"^\s*(created|deleted|removed|ran|edited|updated|installed|uninstalled|wrote|added|fixed|generated|"
    r"executed|searched|opened|saved|renamed|moved|copied|deployed|reformatted|applied|restarted|started|"
    r"stopped|built|downloaded|uploaded|committed|pushed|merged|sent|booked|scheduled|reset|changed)\b",
    re.IGNORECASE,
)

_COMMAND_OUTPUT = re.compile(
    r"\b\d+\s+(passed|failed|errors?|skipped|warnings?|deselected|xfailed|xpassed)\b"
    r"|\b(exit(ed)?( with)?( status| code)|return(ed)? code|status code)\s*[:=]?\s*-?\d+"
    r"|\bin\s+\d+(\.\d+)?\s?(ms|s|sec|secs|seconds|min)\b"
    r"|\(\s*\d+(\.\d+)?\s?(b|kb|kib|mb|mib|gb|ms|s)\s*[,)]"
    r"|\b\d+(\.\d+)?\s?(kb|kib|mb|mib|ms)\b.{0,20}\b\d+(\.\d+)?\s?(ms|s)\b"
    r"|\bsuccessfully (installed|built|tagged|created|deployed|completed|uninstalled)\b"
    r"|\b(apply|plan|build|job|run|task|step) (complete|completed|finished|succeeded|failed)\b"
    r"|\b(traceback|stack trace|segmentation fault|core dumped)\b"
    r"|^\s*(error|warning|warn|info|debug|fatal|critical)\s*[:\]]"
    r"|^\s*[A-Z][A-Za-z]+(Error|Exception|Warning)\b"
    r"|\b(returned|responded( with)?|got( a)?)\s+(http\s+)?[1-5]\d\d\b"
    r"|\b[1-5]\d\d (ok|created|accepted|no content|not found|bad request|unauthorized|forbidden|"
    r"internal server error)\b"
    r"|\b\d{1,2}:\d{2}:\d{2}(\.\d+)?z?\b|\b\d{4}-\d{2}-\d{2}t\d{2}:\d{2}"
    r"|\b[a-z_]+=\d+(\.\d+)?\b"
    r"|\bresources:\s*\d+ added|\btest_\w+"
    r"|\b\d+ (modified |new |changed )?(files?|rows?|records?|items?|lines?|tests?|packages?|events?|insertions?|"
    r"deletions?|objects?|documents?|users?)\s*(\(\S*\)\s*)?(changed|added|removed|deleted|updated|processed|"
    r"collected|found|inserted|modified|scanned|indexed|failed|passed|written|copied|affected)\b"
    r"|\b(collected|processed|found|inserted|deleted|updated|scanned|indexed|shows|wrote|copied|affected)\s+"
    r"\d+\s+(\w+\s+)?(items?|files?|rows?|records?|tests?|packages?|events?|lines?|objects?|documents?)\b"
    r"|\b(stdout|stderr|exit code|[$#] \w+)",
    re.IGNORECASE,
)

_CALCULATION = re.compile(
    r"[-+−]?\d[\d.,]*\s*(°\s?[cfk]|%|[a-z]{1,12})?\s*(\)\s*)?(=|≈|~|is (about|around|roughly|approximately|"
    r"equal to)|equals|comes to|converts? to|rounds? (up |down )?to|is)\s*(about |around |roughly |~)?"
    r"[-+−]?\d[\d.,]*\s*(°\s?[cfk]|%|[a-z]{1,12})?\s*\.?$"
    r"|\b\w+\((['\"]?[\w.]+['\"]?)\)\s*(rounds?|returns?|gives|yields|evaluates|equals|is)\b"
    r"|^\s*[-+−]?\d[\d.,]*\s*(°\s?[cfk]|[a-z]{1,12})?\s+(of\s+)?[\w\s]{0,30}(=|≈)\s*[-+−]?\d",
    re.IGNORECASE,
)

_LOCAL = re.compile(
    r"\blocalhost\b|\b127\.\d+\.\d+\.\d+\b|\b0\.0\.0\.0\b|\[::1\]"
    r"|\b10\.\d{1,3}\.\d{1,3}\.\d{1,3}\b|\b192\.168\.\d{1,3}\.\d{1,3}\b|\b172\.(1[6-9]|2\d|3[01])\.\d{1,3}\.\d{1,3}\b"
    r"|(^|[\s(\"'`=:])(~|/home|/root|/tmp|/var/tmp|/workspace|/workspaces|/app|/mnt|/Users|/private/var|"
    r"/var/folders|/data|/srv|/opt/[\w.-]+/(src|work))(/|\b)"
    r"|\b[A-Za-z]:\\(Users|Temp|tmp)\\"
    r"|\bport\s+\d{2,5}\b|\b(?=[\w.-]*[a-z])[\w.-]+:\d{2,5}\b"
    r"|\b[\w./-]+\.(py|js|ts|tsx|jsx|go|rs|java|rb|c|cc|cpp|h|toml|ya?ml|json|cfg|ini)\b.{0,12}\blines?\s+\d+"
    r"|\blines?\s+\d+(\s*-\s*\d+)?\s+(of|in)\s+[\w./-]+\.\w+"
    r"|\b(dev|development|local|staging|test|scratch|sandbox)\s+(db|database|server|environment|env|"
    r"instance|box|machine|container|cluster|checkout)\s+(has|had|holds|contains|shows|is at|at|runs at|"
    r"running (at|on)|listens|listening|is (up|down|running))\b"
    r"|\b(checkout|clone|working copy|repo(sitory)?|code)\s+(lives|is|sits)\s+(at|in|under)\s+[~/]",
    re.IGNORECASE,
)

_EPHEMERAL_ID = [
    re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b"),  # commit, task, container ids
    re.compile(r"\b[a-z]{1,6}_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{3,}\b"),  # rem_8f21c, ch_9XkQ, doc_5521
    re.compile(r"(^|\s)#\d{3,}\b"),  # ticket #48213
    re.compile(r"\b[A-Z]{2,5}-\d{3,}(-\d+)*\b"),  # TDC-55819, INV-2024-0891
    re.compile(r"\b(?=\w*[a-z])(?=\w*[A-Z])(?=\w*\d)[A-Za-z0-9]{4,}-[A-Za-z0-9]{3,}\b"),  # Zk81-QQ7e
    re.compile(
        r"\b(ticket|order|booking|confirmation|reservation|case|request|invoice|job|build|run|pid|"
        r"session|transaction|tracking)\s+(number|no\.?|id|#)?\s*[:#]?\s*[A-Z0-9][\w-]*\d",
        re.IGNORECASE,
    ),
]

_RECURRING = re.compile(
    rf"\b(every|each|always|never|usually|normally|generally|typically|weekly|daily|monthly|yearly|annually|"
    rf"by default|default|going forward|from now on|in general|whenever|all|any|"
    rf"(mornings|afternoons|evenings|nights|weekends|weekdays|weeknights)|({_WEEKDAYS})s)\b"
    rf"|\b({_WEEKDAYS})\s+(and|&|or)\s+({_WEEKDAYS})\b",
    re.IGNORECASE,
)
_DURABLE_DATE = re.compile(
    r"\b(born|birthday|anniversary|since|founded|established|started in|joined in|"
    r"every year|annually|each year)\b",
    re.IGNORECASE,
)
_TEMPORAL = re.compile(
    rf"\b(today|tonight|tomorrow|yesterday|this (morning|afternoon|evening|week|weekend|month|year|sprint|quarter)|"
    rf"this week's|tonight's|today's|tomorrow's|right now|at the moment|for now|for the time being|"
    rf"(next|last|coming) (week|weekend|month|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    rf"the long weekend|later (today|on|this)|until further notice|temporar(y|ily)|one-time|one time|"
    rf"expir(es|ing|ed|y)|valid until|until \d|on offer|on sale|due (on |by )?({_WEEKDAYS}|today|tomorrow|"
    rf"next|this|\d)|deadline|reminder|scheduled for|(is|are|am) (currently )?(on vacation|on holiday|"
    rf"away|traveling|travelling|sick|ill|tired|exhausted|busy|hungry|stressed|bored|in a meeting|running late|"
    rf"off work|out of office))\b"
    rf"|\b(exhausted|tired|sick|hungover) (today|now|tonight)\b"
    rf"|\b(currently|right now|at present) (failing|broken|down|offline|unavailable|running|building|deploying|"
    rf"blocked|waiting|in|at|on|away|traveling|travelling|sick)\b"
    rf"|\b(weather|forecast)\b"
    rf"|\b(todo|fixme|wip|tmp|test marker|placeholder)\b",
    re.IGNORECASE,
)
_CLOCK = re.compile(r"(?<![\d.:])([01]?\d|2[0-3])(:|h)[0-5]\d\b(?![.:]\d)|\b\d{1,2}\s?(am|pm)\b", re.IGNORECASE)
_DATE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}[./]\d{{1,2}}[./]\d{{2,4}}\b"
    rf"|\b\d{{1,2}}(st|nd|rd|th)?\s+({_MONTHS})\b|\b({_MONTHS})\s+\d{{1,2}}(st|nd|rd|th)?\b",
    re.IGNORECASE,
)
_WEEKDAY = re.compile(rf"\b({_WEEKDAYS})\b", re.IGNORECASE)

_ONE_OFF = re.compile(
    r"\b(asked|asks|requested|requests|wanted|needed) (the |an? )?(assistant|agent|ai|bot|you|me|it|for|to|"
    r"about|how|what|whether|if|help)\b"
    r"|\b(wants|would like|needs|wanted|needed|plans|planned|intends|is going|are going|am going|"
    r"is about|will|'ll|is planning|are planning) (the (assistant|agent) )?to\b"
    r"|\b(user|they|he|she|we|i) (will|shall|'ll|is going to|are going to|plan to|plans to)\b"
    r"|\b(wants|needs|would like) (help|a |an |some |the assistant|the agent|you)\b"
    r"|\bhelp (with|me|them|him|her)\b"
    r"|\b(conversation|question|chat|session|discussion|request|topic)\s+(was|is|were)\s+(about|on|regarding)\b"
    r"|\b(is|are|am|was|were) (looking for|trying to|searching for|shopping for|thinking about|deciding|"
    r"wondering|waiting for)\b"
    r"|^\s*(please|can you|could you|would you|let'?s|book|find|set|remind|check|add|create|send|make|write|"
    r"tell|show|give|translate|summari[sz]e|convert|calculate|plan|look up|search)\b",
    re.IGNORECASE,
)
_DURABLE_WANT = re.compile(
    r"\b(always|every|everything|all|any|never|by default|default|from now on|"
    r"going forward|in general|whenever|each)\b",
    re.IGNORECASE,
)

_IRREGULAR_PAST = (
    "ran|got|wrote|fell|rose|went|saw|took|began|ate|flew|grew|knew|drove|drew|broke|chose|gave|"
    "came|became|spoke|stole|threw|woke|wore|sank|sang|swam|shook|forgot|froze|hid|bit|tore"
)
_PAST_EVENT = re.compile(
    rf"\b({_IRREGULAR_PAST})\b"
    r"|\b(was|were)\s+(\w+ly\s+)?(\w+ed|sent|built|made|run|done|set|put|cut|hit|shut|split|rebuilt|"
    r"rerun|reset|found|lost|paid|sold|told|kept|left|given|taken|written|broken|shown|seen)\b(?!\s+(by|in|as)\b)"
    r"|\b(was|were)\s+\d"
    r"|\b\w+ed\s+\d+\s+[a-z]+s\b"  # shifted 14 events, reformatted 37 files
    r"|(^|\s)[\w:./-]*\d[\w:./-]*\s+(started|stopped|finished|completed|deployed|failed|crashed|exited|"
    r"restarted|created|deleted|succeeded|timed out)\b",
    re.IGNORECASE,
)
_BE_OR_HAVE = re.compile(r"\b(is|are|am|be|been|being|has|have|had|get|gets)\s+(\w+ly\s+)?\w+ed\b", re.IGNORECASE)

_VERBS = set(
    """
is are am was were be been being has have had do does did can could must should shall will would may might
prefer prefers preferred like likes love loves hate hates dislike dislikes want wants need needs use uses used
live lives work works run runs deploy deploys host hosts own owns lead leads manage manages speak speaks
write writes read reads eat eats drink drinks cook cooks take takes order orders sign signs accept accepts
keep keeps go goes make makes get gets know knows call calls build builds require requires allow allows avoid
avoids enjoy enjoys play plays study studies teach teaches travel travels drive drives stay stays belong belongs
contain contains include includes depend depends expect expects support supports serve serves follow follows
mean means refer refers store stores pay pays buy buys shop shops wear wears sleep sleeps wake wakes start
starts finish finishes handle handles track tracks send sends receive receives target targets rely relies
pin pins lock locks limit limits block blocks cap caps forbid forbids ban bans mandate mandates insist insists
care cares value values favour favours favor favors choose chooses pick picks tend tends commute commutes
report reports reply replies respond responds answer answers review reviews approve approves test tests
""".split()
)

_STOP = set(
    """
a an the and or but nor of to in on at by for with from into onto over under as than then that this these those
it its it's is are am was were be been being has have had do does did can could must should shall will would may
might not no never ever all any every each some such very just only also so too there here their them they he she
his her our ours we you your i me my mine about after before via per if when while which who whom whose what where
why how
""".split()
)
# Words that frame a memory without carrying its content ("User prefers ...").
_FRAME = set(
    """
user user's users assistant agent prefer prefers preferred preference want wants like likes use uses using used
always never should must need needs please keep thing things way lot always also really
""".split()
)


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


_AFTER_VERB = set(
    """
in on at to for with from by into onto via over under about as the a an all every each its their his her our my
your only always never no some any more less up out off down back it them him us
""".split()
)


def _has_verb(words: Sequence[str]) -> bool:
    lowered = [w.lower().strip(".,;:!?") for w in words]
    if any(w in _VERBS for w in lowered):
        return True
    # an -s / -ed form followed by what follows verbs ("Orbit Freight signs in", "orders groceries online")
    for i, word in enumerate(lowered[1:], start=1):
        if (
            not word.isalpha()
            or len(word) <= 3
            or not (word.endswith("ed") or (word.endswith("s") and not word.endswith("ss")))
        ):
            continue
        after = lowered[i + 1] if i + 1 < len(lowered) else ""
        if (
            after in _AFTER_VERB
            or after[:1].isdigit()
            or (after.endswith("s") and len(after) > 3)
            or (not after and word.endswith("ed"))
        ):
            return True
    return False


def rule_reason(text: str, area: str = "fragments") -> tuple[str, str] | None:
    """(reason, detail) of the first form rule `text` breaks, or None. Solutions get the lighter set."""
    clean = " ".join(text.split())
    words = _words(clean)
    if area == "solutions":
        return _solution_reason(clean, words)
    if len(words) < 3 or len(clean) < 12:
        return "too_short", f"{len(words)} words"
    if len(clean) > MAX_FRAGMENT_CHARS:
        return "too_long", f"{len(clean)} characters"
    checks: list[tuple[str, Callable[[str], str | None]]] = [
        ("greeting", lambda t: _match(_GREETING, t)),
        ("date_only", lambda t: _match(_DATE_ONLY, t)),
        ("agent_action", lambda t: _match(_AGENT_SUBJECT, t) or _match(_VERB_FIRST, t)),
        ("command_output", lambda t: _match(_COMMAND_OUTPUT, t)),
        ("calculation", lambda t: _match(_CALCULATION, t)),
        ("local_coordinate", lambda t: _match(_LOCAL, t)),
        ("ephemeral_id", _ephemeral_id),
        ("temporary", _temporary),
        ("one_off_request", _one_off),
        ("past_event", _past_event),
        ("bare_topic", lambda t: None if _has_verb(words) else "no verb"),
    ]
    for reason, check in checks:
        detail = check(clean)
        if detail:
            return reason, detail
    return None


def _solution_reason(clean: str, words: Sequence[str]) -> tuple[str, str] | None:
    """Solutions legitimately quote errors, commands and config paths; only the clearly wrong go."""
    if len(words) < 6:
        return "too_short", f"{len(words)} words"
    if len(clean) > MAX_SOLUTION_CHARS:
        return "too_long", f"{len(clean)} characters"
    for reason, pattern in (("greeting", _GREETING), ("agent_action", _AGENT_SUBJECT)):
        detail = _match(pattern, clean)
        if detail:
            return reason, detail
    home = re.search(r"(^|[\s(\"'`])(/home/|/Users/|~/|/tmp/|/root/)[\w.-]+", clean)
    if home:
        return "local_coordinate", home.group(0).strip()
    return None


def _match(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.search(text)
    return found.group(0).strip() or "matched" if found else None


def _ephemeral_id(text: str) -> str | None:
    for pattern in _EPHEMERAL_ID:
        found = pattern.search(text)
        if found:
            return found.group(0).strip()
    return None


def _temporary(text: str) -> str | None:
    detail = _match(_TEMPORAL, text)
    if detail:
        return detail
    recurring = _RECURRING.search(text)
    date = _DATE.search(text)
    if date and not _DURABLE_DATE.search(text) and not recurring:
        return date.group(0)
    clock = _CLOCK.search(text)
    if clock and not recurring:
        return clock.group(0)
    weekday = _WEEKDAY.search(text)
    if weekday and not recurring:
        return weekday.group(0)
    return None


def _one_off(text: str) -> str | None:
    found = _ONE_OFF.search(text)
    if not found:
        return None
    if re.search(r"\b(wants|would like|needs)\b", found.group(0), re.IGNORECASE) and _DURABLE_WANT.search(text):
        return None  # "wants British English in everything" is a preference, not a request
    return found.group(0).strip()


def _past_event(text: str) -> str | None:
    found = _PAST_EVENT.search(text)
    if not found:
        return None
    word = found.group(0).strip()
    if word.lower().endswith("ed") and _BE_OR_HAVE.search(text) and " " not in word:
        return None
    return word


# --- grounding and echo ----------------------------------------------------------------------------

_SUFFIXES = ("ingly", "edly", "ings", "ing", "ied", "ies", "ed", "es", "ly", "s")


def stem(word: str) -> str:
    w = word.lower().strip("'’.-/:")
    w = re.sub(r"['’]s$", "", w)
    for suffix in _SUFFIXES:
        if len(w) - len(suffix) >= 3 and w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    return w[:6]


def content_stems(text: str) -> list[str]:
    out: list[str] = []
    for word in re.findall(r"[^\W_]+", text):
        low = word.lower()
        if low in _STOP or low in _FRAME or len(low) < 2:
            continue
        out.append(stem(low))
    return list(dict.fromkeys(out))


def key_entities(text: str) -> list[str]:
    """Names and numbers a statement hinges on: capitalised inside the sentence, ALLCAPS, with digits."""
    found: list[str] = []
    for position, word in enumerate(re.findall(r"[^\W_][\w.\-]*[^\W_]|[^\W_]", text)):
        if word.lower() in _STOP or word.lower() in _FRAME:
            continue
        if any(c.isdigit() for c in word) or (position > 0 and word[0].isupper()):
            found.append(word)
    return list(dict.fromkeys(found))


# Language and nationality words: a conversation held in a language rarely names it.
_IMPLIED = frozenset(
    """english british american german french spanish chinese mandarin cantonese japanese korean
italian portuguese brazilian dutch russian arabic hindi polish swedish norwegian danish finnish turkish greek czech
ukrainian hebrew vietnamese thai indonesian""".split()
)
_NUMBER_WORDS = {
    str(i): w for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())
}


def _cjk_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    return sum(1 for c in letters if not c.isascii() and ord(c) >= 0x2E80) / len(letters)


@dataclass
class Verdict:
    text: str
    area: str
    reason: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.reason is None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "area": self.area, "reason": self.reason, "detail": self.detail}


# An embedder function: texts -> normalised vectors (rows).
EmbedFn = Callable[[list[str]], "np.ndarray"]


@dataclass
class Grounding:
    """What a candidate may be grounded in: the user's and tools' messages, minus recalled memories."""

    evidence: list[str]
    recalled: list[str] = field(default_factory=list)
    # what the assistant said too: solutions are usually worked out by the agent itself
    discussion: list[str] = field(default_factory=list)
    embed: EmbedFn | None = None
    min_overlap: float = 0.3
    similarity: float = 0.8
    echo_similarity: float = 0.9
    _stems: set[str] = field(default_factory=set, init=False, repr=False)
    _lower: str = field(default="", init=False, repr=False)
    _cjk: bool = field(default=False, init=False, repr=False)
    _all_stems: set[str] = field(default_factory=set, init=False, repr=False)
    _vectors: Any = field(default=None, init=False, repr=False)
    _recalled_vectors: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        joined = "\n".join(self.evidence)
        self._lower = joined.lower()
        self._stems = {stem(w) for w in re.findall(r"[^\W_]+", joined)}
        # the user's own language decides whether words can be matched at all (tool output is English)
        self._cjk = _cjk_share(self.evidence[0] if self.evidence else "") > 0.2 or _cjk_share(joined) > 0.2
        self._all_stems = self._stems | {stem(w) for w in re.findall(r"[^\W_]+", "\n".join(self.discussion))}

    @classmethod
    def from_messages(cls, messages: Iterable[Message], recalled: Sequence[str] = (), **options: Any) -> Grounding:
        evidence: list[str] = []
        discussion: list[str] = []
        user_text: list[str] = []
        found_recalled: list[str] = list(recalled)
        for message in messages:
            text, quoted = split_recalled(message.content)
            found_recalled += quoted
            if not text.strip() or message.role == "system":
                continue
            discussion.append(text)
            if message.role == "user":
                user_text.append(text)
            if message.role in ("user", "tool"):
                evidence.append(text)
        if user_text:  # the first evidence item decides the language check
            evidence.insert(0, "\n".join(user_text))
        return cls(evidence, list(dict.fromkeys(found_recalled)), discussion, **options)

    def support(self, text: str) -> tuple[float, list[str]]:
        """(share of content words found in the evidence, key entities missing from it)."""
        stems = content_stems(text)
        found = [s for s in stems if s in self._stems or any(e.startswith(s) for e in self._stems if len(s) >= 5)]
        coverage = len(found) / len(stems) if stems else 1.0
        missing = [e for e in key_entities(text) if not self._mentions(e)]
        return coverage, missing

    def _mentions(self, entity: str) -> bool:
        low = entity.lower()
        if low in self._lower or stem(low) in self._stems or low in _IMPLIED:
            return True
        if low in _NUMBER_WORDS and re.search(rf"\b{_NUMBER_WORDS[low]}\b", self._lower):
            return True  # "3 kids" ~ "three kids"
        return len(low) >= 6 and low[:5] in self._lower  # PostgreSQL ~ Postgres

    def check(self, text: str, area: str = "fragments") -> tuple[str, str] | None:
        echoed = self.echo_of(text)
        if echoed is not None:
            return "echo", echoed
        if not self.evidence:
            return None
        if area == "solutions":
            return self._check_solution(text)
        coverage, missing = self.support(text)
        if self._cjk:  # the words cannot be matched across languages: only names and numbers count
            missing = [e for e in missing if any(c.isdigit() for c in e) or e.isupper()]
            entities = [e for e in key_entities(text) if any(c.isdigit() for c in e) or e.isupper()]
            if entities and len(missing) > len(entities) / 2:
                return "ungrounded", "not in the transcript: " + ", ".join(missing)
            return None
        entities = key_entities(text)
        # most of its names are not in the transcript, and neither are most of its words: invented
        entity_gap = bool(missing) and len(missing) > len(entities) / 2 and coverage < 0.75
        if coverage >= self.min_overlap and not entity_gap:
            return None
        if not entity_gap and self._similar_to_evidence(text) >= self.similarity:
            return None
        words = ", ".join(missing) if entity_gap else f"{coverage:.0%} of its words found"
        return "ungrounded", words

    def _check_solution(self, text: str) -> tuple[str, str] | None:
        """Know-how is often worked out by the agent: any message of the conversation may support it."""
        if self._cjk:
            return None
        stems = content_stems(text)
        found = [s for s in stems if s in self._all_stems]
        coverage = len(found) / len(stems) if stems else 1.0
        if coverage >= self.min_overlap or self._similar_to_evidence(text) >= self.similarity:
            return None
        return "ungrounded", f"{coverage:.0%} of its words found in the conversation"

    def _similar_to_evidence(self, text: str) -> float:
        if self.embed is None or not self.evidence:
            return 0.0
        import numpy as np

        if self._vectors is None:
            self._vectors = self.embed(_chunks(self.evidence))
        vector = self.embed([text])[0]
        return float((1.0 + np.max(self._vectors @ vector)) / 2.0)

    def echo_of(self, text: str) -> str | None:
        """The recalled memory `text` restates, if any (by wording, or by embedding when available)."""
        if not self.recalled:
            return None
        mine = set(content_stems(text))
        for memory in self.recalled:
            theirs = set(content_stems(memory))
            if mine and theirs and len(mine & theirs) / len(mine) >= 0.8 and len(mine & theirs) / len(theirs) >= 0.6:
                return memory
        if self.embed is None:
            return None
        import numpy as np

        if self._recalled_vectors is None:
            self._recalled_vectors = self.embed(list(self.recalled))
        scores = (1.0 + self._recalled_vectors @ self.embed([text])[0]) / 2.0
        best = int(np.argmax(scores))
        return self.recalled[best] if scores[best] >= self.echo_similarity else None


def _chunks(texts: Sequence[str], size: int = 400, limit: int = 400) -> list[str]:
    """Evidence split into embeddable pieces (lines, then fixed windows), at most `limit` of them."""
    out: list[str] = []
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            while line:
                out.append(line[:size])
                line = line[size:]
    return out[-limit:] or [""]


# --- recalled blocks ----------------------------------------------------------------------------------


def recall_headings() -> list[str]:
    """The headings `memctl recall` renders (from prompts/recall_*.md), so echoes can be spotted."""
    from memctl.llm import load_template

    headings = []
    for name in ("recall_memories", "recall_solutions"):
        try:
            first = load_template(name).strip().splitlines()[0]
        except Exception:  # noqa: BLE001 - a missing template only weakens echo detection
            continue
        if first.startswith("#"):
            headings.append(first.strip())
    return headings


def split_recalled(text: str) -> tuple[str, list[str]]:
    """(text without recalled blocks, the memories those blocks listed)."""
    headings = recall_headings()
    if not headings or not any(h in text for h in headings):
        return text, []
    kept: list[str] = []
    quoted: list[str] = []
    inside = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in headings:
            inside = True
            continue
        if inside and stripped.startswith("#"):
            inside = False
        if inside:
            if stripped.startswith(("- ", "* ")):
                quoted.append(stripped[2:].strip())
                continue
            if not stripped:
                continue
            if quoted and line.startswith((" ", "\t")):
                quoted[-1] += " " + stripped
                continue
            inside = False
        kept.append(line)
    return "\n".join(kept), quoted


def parse_recalled(raw: str) -> list[str]:
    """Memories from a `--recalled` file: recall's prompt block, its JSON, or one memory per line."""
    import json

    text = raw.strip()
    if not text:
        return []
    if text[0] in "[{":
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            items = [i for key in ("memories", "solutions", "results") for i in data.get(key) or []]
            return [str(i.get("text", "")) for i in items if isinstance(i, dict) and i.get("text")]
        if isinstance(data, list):
            return [str(i.get("text", i)) if isinstance(i, dict) else str(i) for i in data if i]
    _, quoted = split_recalled(text)
    if quoted:
        return quoted
    return [
        line.strip().lstrip("-* ").strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


# --- the gate -----------------------------------------------------------------------------------------


def check(text: str, area: str = "fragments", grounding: Grounding | None = None) -> Verdict:
    """The verdict on one candidate: form rules first, then grounding and echo (with a transcript)."""
    found = rule_reason(text, area)
    if found is None and grounding is not None:
        found = grounding.check(text, area)
    return Verdict(text, area, *(found or (None, "")))


def gate(texts: Sequence[str], area: str = "fragments", grounding: Grounding | None = None) -> list[Verdict]:
    return [check(t, area, grounding) for t in texts]
