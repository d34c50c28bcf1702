"""The named rules of the quality gate: each recognises one kind of statement that is not a durable fact.

A rule looks at the *form* of a statement (identifier shapes, who acted, relative time with no
anchor, the shape of command output), never at particular strings, and works on English, Chinese
and mixed text: every class has English and Chinese patterns, and no English word list decides
the fate of a Chinese sentence (a rule built on English grammar, such as `bare_topic`, does not
look at CJK text at all).

A rule returns what it matched (the `detail` shown to the user) or None. Which rules may drop a
candidate is decided by measurement, not here: `scripts/train_gate.py` measures every rule's
precision on the tune half of the corpus and writes the ones that are right at least 97 % of the
time into `memctl/data/gate.json` (see `memctl.quality`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memctl.grounding import CJK_CHARS, CJK_RUN, cjk_share

_CJK = f"[{CJK_CHARS}]"
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_ZH_DAY = "[一二三四五六日天1-7]"
_WORD = re.compile(r"[^\W_](?:[\w'’.\-/@:+]*[^\W_])?", re.UNICODE)
MAX_FRAGMENT_CHARS = 600
MAX_SOLUTION_CHARS = 2000


@dataclass(frozen=True)
class Rule:
    name: str
    areas: tuple[str, ...]  # "fragments", "solutions"
    check: Callable[[str], str | None]
    meaning: str


def _any(*patterns: re.Pattern[str]) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        for pattern in patterns:
            found = pattern.search(text)
            if found:
                return found.group(0).strip() or "matched"
        return None

    return check


def _en(text: str) -> bool:
    """Is the statement written mostly in an alphabetic script (English grammar applies)?"""
    return cjk_share(text) <= 0.2


# --- anchors and durable markers: what turns a lookalike into a fact ---------------------------------

# an absolute date: 2027-03-15, 15/03/2027, 15 March, March 2027, FY2026, Q3 2026, 2027年3月, 3月15日
_ABSOLUTE_DATE = re.compile(
    rf"\b\d{{4}}-\d{{1,2}}(-\d{{1,2}})?\b|\b\d{{1,2}}[./]\d{{1,2}}[./]\d{{2,4}}\b"
    rf"|\b\d{{1,2}}(st|nd|rd|th)?\s+(of\s+)?({_MONTHS})\b|\b({_MONTHS})\.?\s+\d{{1,2}}(st|nd|rd|th)?\b"
    rf"|\b({_MONTHS})\.?\s+\d{{4}}\b|\b(in|by|until|since|from) (early |mid-?|late )?\d{{4}}\b"
    rf"|\b(fy|q[1-4])\s?'?\d{{2,4}}\b|\d{{2,4}}\s*年|\d{{1,2}}\s*月\s*\d{{1,2}}\s*[日号]|\d{{1,2}}\s*月(底|初|中旬|份)",
    re.IGNORECASE,
)
# a recurring schedule or a standing rule
_RECURRING = re.compile(
    rf"\b(every|each|always|never|usually|normally|generally|typically|weekly|daily|nightly|hourly|monthly|"
    rf"yearly|annually|quarterly|fortnightly|biweekly|bi-weekly|semesterly|per (day|week|month|year|quarter)|"
    rf"a (day|week|month|year)|by default|default|going forward|from now on|in general|whenever|"
    rf"standing|recurring|regular(ly)?|routine|mornings|afternoons|evenings|nights|weekends|weekdays|weeknights|"
    rf"(?<!the )holidays|"
    rf"({_WEEKDAYS})s|(mon|tue|wed|thu|fri|sat|sun)[a-z]*\s*(-|–|to|through|thru)\s*(mon|tue|wed|thu|fri|sat|sun)[a-z]*)\b"
    rf"|\b({_WEEKDAYS})(\s+(and|&|or)\s+|\s*,\s*)({_WEEKDAYS})\b"
    rf"|每|总是|一直|始终|通常|经常|平时|默认|以后都|从现在起|今后|往后|长期|定期|工作日|习惯|一般|往往|节假日|"
    rf"[周礼拜星期]{_ZH_DAY}(到|至|和|、|-|–)[周礼拜星期]?{_ZH_DAY}"
    rf"|\bon the \d{{1,2}}(st|nd|rd|th)\b(?!\s+(of\s+)?({_MONTHS})\b)",
    re.IGNORECASE,
)


def _anchored(text: str) -> bool:
    return bool(_ABSOLUTE_DATE.search(text) or _RECURRING.search(text))


# --- greetings, dates, the agent's own actions -------------------------------------------------------

_GREETING = re.compile(
    r"^\s*(hi+|hello|hey|good (morning|afternoon|evening|night)|thanks?( you)?|thank you|bye|goodbye|cheers|"
    r"see you|you'?re welcome|ok(ay)?|great|perfect)\b[\s!.,:;)\-]*\w{0,12}[\s!.]*$"
    r"|\b(greet(s|ed|ing)? (the )?(assistant|agent|bot|ai)|said (hi|hello|hey|bye|goodbye|thanks|thank you)|"
    r"says (thanks|thank you) for (the|all the|your|this)|"
    r"thank(s|ed) the (assistant|agent)|"
    r"small talk|asked how (its|the assistant'?s|the agent'?s|your) day)\b"
    r"|^\s*(你好|您好|嗨|哈喽|早上好|早安|晚上好|晚安|下午好|谢谢|多谢|感谢|再见|拜拜|好的)[啊呀呢吧了！!。，,~\s]*$"
    r"|(打了?(个)?招呼|问好|寒暄|道谢|表示感谢|说了?(声)?(谢谢|你好|再见))",
    re.IGNORECASE,
)

_DATE_ONLY = re.compile(
    rf"^\s*(today|tomorrow|yesterday|tonight|the (current )?date|the day|it)\s*('s|’s| is| was| will be)\s+"
    rf"((a|the)\s+)?({_WEEKDAYS}|{_MONTHS}|\d|\s|,|\.|-|/|of|the|st|nd|rd|th)+$"
    rf"|^\s*(今天|明天|昨天|今日|现在)(是|为)?\s*([\d年月日号,，\s]|星期|周|礼拜|[一二三四五六七日天])+[。.！!]?\s*$",
    re.IGNORECASE,
)

_AGENT_SUBJECT = re.compile(
    r"^\s*(the\s+)?(agent|assistant|ai|bot|model|llm|chatbot|i|we|memctl|it|claude|gpt)('ve|'d)?\s+(has\s+|have\s+|had\s+|"
    r"then\s+|also\s+|just\s+|successfully\s+|first\s+)*(re-?)?(\w+ed|ran|wrote|made|built|set|put|did|sent|found|gave|"
    r"took|got|read|kept|began|chose|brought|told|showed|shown|done|run|written|searched|fixed|tried)\b",
    re.IGNORECASE,
)
_VERB_FIRST = re.compile(
    r"^\s*(created|deleted|removed|ran|edited|updated|installed|uninstalled|wrote|added|fixed|generated|"
    r"executed|searched|opened|saved|renamed|moved|copied|deployed|reformatted|applied|restarted|started|"
    r"stopped|built|downloaded|uploaded|committed|pushed|merged|sent|booked|scheduled|reset|changed|suggested|"
    r"recommended|explained|proposed|drafted|summari[sz]ed|translated|converted|calculated|checked|looked up|"
    r"reviewed)\b",
    re.IGNORECASE,
)
_ZH_ACTS = (
    "创建|新建|删除|删掉|运行|执行|跑了|修改|改了|编辑|安装|卸载|写了|写入|更新|生成|搜索|"
    "查询|查了|重启|部署|提交|推送|发送|发了|预订|订了|设置了|修复|检查了|打开|保存|移动|"
    "复制|下载|上传|重命名|格式化|翻译了|总结了|计算了|推荐了|建议了|比较了|对比了|整理了|"
    "列出了|找了|算了|设了|设好|定了|调到|调了|加了|关了|开了|记下|记录了|发到|重新发|生成好|"
    "写好|做好|改好|弄好|整理好|起草|拟好|拟了|画好|列好|查好|订好|算好|重试|重新|导入|导出"
)
_ZH_AGENT = re.compile(
    rf"^\s*(助手|智能体|代理|AI|机器人|模型|我们?|Agent|assistant)\s*(已经?|刚刚?|先|又|还|也|随后|然后|成功)*"
    rf"(帮|为|给|替)?(用户|你|他|她)?\s*({_ZH_ACTS})"
    rf"|^\s*(已经?|刚刚?)\s*({_ZH_ACTS})"
    rf"|^\s*(助手|智能体|代理|AI|机器人|模型)\s*(已经?|刚刚?|先|又|还|也)?\s*(把|将)"
    rf"|^\s*已(经)?(为|给|帮)(用户|你|他|她)",
    re.IGNORECASE,
)

# --- command output, tool status lines, raw errors ---------------------------------------------------

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
    r"\d+\s+(\w+\s+){0,2}(items?|files?|rows?|records?|tests?|packages?|events?|lines?|objects?|documents?)\b"
    r"|\b(stdout|stderr|exit code)\b|(^|\s)[$#] [a-z][\w-]*"
    r"|\b(found|detected|flagged|banned|blocked|rejected|skipped|quarantined)\s+\d+\b"
    r"|\breturned (queued|ok|success|succeeded|error|null|none|false|true|empty|nothing)\b"
    r"|\b\d+m\s?\d+(\.\d+)?s\b|\b[1-5]\d\d (conflict|too many requests|bad gateway|service unavailable|"
    r"gateway timeout|moved permanently|found|not modified)\b"
    r"|\b(finished|completed|ended|exited|failed|aborted) with (errors?|warnings?|status|failures?)\b"
    r"|\b\d{4,}\s*bytes\b|(编译|生成|输出|导出)(出来|出|了)\s*\d+\s*(页|个|行)"
    r"|(?-i:^\s*[a-z][\w.-]*\s+(reports?|reported|shows?|showed|says|said|prints?|printed|warned|warns|returned|"
    r"outputs?|found)\b)|\b[\w.-]+ (warned|warns|complained|errored|reported|failed|says|said):"
    r"|\blogs?\s+(shows?|showed|says|said|reports?|reported|printed|prints)\b"
    r"|\b(dmesg|journalctl|syslog|logcat|the logs?|console|stderr|stdout|dashboard|status page|tracking|grafana)"
    r"\s+(shows?|showed|says|said|reports?|"
    r"reported|printed|prints)\b|(日志|控制台|终端)(里|中|上)?(显示|提示|报|打印)"
    r"|\b(failed|aborted|gave up|stopped) (with (http |status |code )?[1-5]\d\d|after \d+ (retries|attempts|tries))\b"
    r"|\((expected|wanted|should be|target)\s+[-+]?\d[\d.]*\)"
    r"|\b\d+(\.\d+)?% packet loss\b|^\s*(ping|curl|dig|nslookup|traceroute|wget)\s+\S+\s*:"
    r"|(发现|找到|检测到|扫描到|删除了|导入了?|处理了?|同步了?|跳过了?)\s*\d+\s*(个|条|张|行|项|处|份)"
    r"|\d+\s*个?(测试|用例)\s*(通过|失败|跳过)|(测试|用例)(全部)?(通过|失败)了?\s*\d|退出码\s*[:：]?\s*-?\d+|"
    r"(耗时|用时)\s*[:：]?\s*\d+(\.\d+)?\s*(毫秒|秒|ms|s)\b",
    re.IGNORECASE,
)
# a tool's status line echoed back: "docker compose up -d [exit code 1]", "Container web-1  Started"
_TOOL_STATUS = re.compile(
    r"\[\s*(exit(ed)?( code| status)?|rc|status|code)\s*[:=]?\s*-?\d+\s*\]"
    r"|(^|\n)\s*[$>#]\s+\S+"
    r"|\b(exited|exit(ed)? with (code|status))\s*\(?-?\d+\)?"
    r"|\b(container|service|network|volume|image|pod|job|task)\s+[\w./:-]+\s+(started|created|running|healthy|"
    r"stopped|exited|removed|pulled|built|killed|terminated|completed|restarted)\b"
    r"|\b\d+/\d+\s+(done|complete|finished|running|ready)\b"
    r"|\b(error response from daemon|npm err!|error:\s+process completed|##\[error\])",
    re.IGNORECASE,
)
_RAW_ERROR = re.compile(
    r"^\s*[\w.]*(Error|Exception|Warning|Fault)\b\s*[:(\[]"
    r"|^\s*[A-Z][A-Za-z]+(Error|Exception)\b"
    r"|(?-i:\b(E[A-Z]{4,}|ERR_[A-Z_]{3,})\b)"
    r"|\berrno\s*[:=]?\s*-?\d+|\bfatal:\s|\bpanic:\s|^\s*error\[E\d+\]"
    r"|\b(permission denied|no such file or directory|connection refused|connection reset( by peer)?|"
    r"command not found|broken pipe|address already in use|out of memory|oom-?killed|killed by signal|"
    r"undefined reference to|cannot find module|module not found|unexpected token|syntax error at|"
    r"could not resolve host|name or service not known|certificate verify failed|access denied for user)\b"
    r"|^\s*(execution|build|compilation|task|job|deployment|upload|sync) failed\b|\bfailed for task\b"
    r"|\b(failed|rejected|error|reason|status)\b[^.;]{0,20}(?-i:\b[A-Z]{2,}(_[A-Z0-9]{2,})+\b)"
    r"|(?-i:CrashLoopBackOff|ImagePullBackOff|ErrImagePull|OOMKilled|Evicted)"
    r"|(^|:\s*)(could not|couldn't|cannot|can't|failed to|unable to) (resolve|fetch|find|connect|open|load|read|"
    r"write|bind|create|start|mount|locate|allocate|access)\b"
    r"|(报错|错误|异常)\s*[:：]\s*\S|(拒绝访问|权限不足|找不到(文件|模块)|连接被拒绝|连接超时)"
    r"|\berror\s+-\d{1,4}\b|^\s*(dmesg|kernel|journalctl|syslog)\s*:|\b[45]\d\d\s+[45]\.\d{1,2}\.\d{1,3}\b"
    r"|\b(export|import|upload|download|sync|backup|render|print|scan|transfer)s?\s+failed\s+(for|on|with)\s+\d"
    r"|(?-i:\b[A-Z][\w.]*( [A-Z][\w.]*)?) error( \d{1,4})?\s*[:'‘\"“]|\bfailed with\s*['‘\"“(]"
    r"|(返回|报了?|报错)\s*[45]\d\d\b|\breturned\s+(HTTP\s?)?[45]\d\d\b|#(NAME\?|REF!|VALUE!|DIV/0!|N/A\b)"
    r"|^\s*[a-z][\w.-]{2,20}:\s+[A-Z][\w ]{2,30}:\s*\S"
    r"|\bHTTP\s?[45]\d\d\s*\(|\b(could not|couldn't|failed to|unable to) (fetch|resolve|connect|load|open)\b"
    r"[^.]{0,40}\b(HTTP\s?[45]\d\d|timed out|refused)",
    re.IGNORECASE,
)

# --- conversions, machine-local coordinates, identifiers -------------------------------------------

_CALCULATION = re.compile(
    r"[-+−]?\d[\d.,]*\s*(°\s?[cfk]|%|[a-z]{1,12})?\s*(\)\s*)?(=|≈|~|is (about|around|roughly|approximately|"
    r"equal to)|equals|comes to|converts? to|rounds? (up |down )?to|is)\s*(about |around |roughly |~)?"
    r"[-+−]?\d[\d.,]*\s*(°\s?[cfk]|%|[a-z]{1,12})?\s*\.?$"
    r"|\b\w+\((['\"]?[\w.]+['\"]?)\)\s*(rounds?|returns?|gives|yields|evaluates|equals|is)\b"
    r"|^\s*[-+−]?\d[\d.,]*\s*(°\s?[cfk]|[a-z]{1,12})?\s+(of\s+)?[\w\s]{0,30}(=|≈)\s*[-+−]?\d"
    r"|^\s*[-+−]?\d[\d.,]*\s*\S{0,6}\s*(约|大约|等于|换算成|≈|=)\s*(约|大约)?\s*[-+−]?\d[\d.,]*\s*\S{0,6}\s*[。.]?\s*$",
    re.IGNORECASE,
)

_LOCAL = re.compile(
    r"\blocalhost\b|\b127\.\d+\.\d+\.\d+\b|\b0\.0\.0\.0\b|\[::1\]"
    r"|\b10\.\d{1,3}\.\d{1,3}\.\d{1,3}\b|\b192\.168\.\d{1,3}\.\d{1,3}\b|\b172\.(1[6-9]|2\d|3[01])\.\d{1,3}\.\d{1,3}\b"
    r"|(^|[\s(\"'`=:：])/dev/(sd[a-z]|nvme\d|hd[a-z]|disk\d|mmcblk\d)\w*"
    r"|(^|[\s(\"'`=:：])(~|/home|/root|/tmp|/var/tmp|/workspace|/workspaces|/app|/mnt|/Users|/private/var|"
    r"/var/folders|/data|/srv|/opt/[\w.-]+/(src|work))(/|\b)"
    r"|\b[A-Za-z]:\\(Users|Temp|tmp)\\|/sdcard/|/storage/emulated/|\bDCIM/|\bIMG_\d{3,}\.(jpe?g|heic|png)\b"
    r"|\bport\s+\d{2,5}\b|\b(?=[\w.-]*[a-z])[\w.-]+:\d{2,5}\b|端口\s*[:：号]?\s*\d{2,5}"
    r"|\b[\w./-]+\.(py|js|ts|tsx|jsx|go|rs|java|rb|c|cc|cpp|h|toml|ya?ml|json|cfg|ini|pm|pl|php|sh|lua|cs|kt|swift)\b"
    r".{0,12}\blines?\s+\d+"
    r"|\blines?\s+\d+(\s*-\s*\d+)?\s+(of|in)\s+[\w./-]+\.\w+|第\s*\d+\s*行"
    r"|\b(dev|development|local|staging|test|scratch|sandbox)\s+(db|database|server|environment|env|"
    r"instance|box|machine|container|cluster|checkout)\s+(has|had|holds|contains|shows|is at|at|runs at|"
    r"running (at|on)|listens|listening|is (up|down|running))\b"
    r"|\b(checkout|clone|working copy|repo(sitory)?|code)\s+(lives|is|sits)\s+(at|in|under)\s+[~/]",
    re.IGNORECASE,
)

# names of standards that look like ticket ids (ISO-8601, RFC-7231): never ephemeral
_STANDARDS = re.compile(
    r"\b(ISO|RFC|PEP|DIN|IEC|IEEE|EN|UTF|SHA|AES|RSA|ECMA|ANSI|BS|GB|JIS|COVID|GPT|CVE|USB|HDMI|"
    r"DDR|PCIE|LPDDR|WIFI|IPV|MP|H|X|A|B|C|Q|FY)-\w"
)
# TDC-55819, INV-2024-0891; also the shape of a product's model number (Ampeg RB-110): see _not_an_id
_TICKET_SHAPE = re.compile(r"\b[A-Z]{2,5}-\d{3,}(-\d+)*\b")
_CODE_SHAPE = re.compile(r"\b[A-Z]{2,10}-(?=[A-Z0-9]*\d[A-Z])[A-Z0-9]{3,}\b")  # MOBILE-4F2 (not RAID-Z2)
# "order 24"; also a quantity ("minimum order 24 candles"): see _not_an_id
_ID_WORDS = re.compile(
    r"\b(ticket|order|booking|confirmation|reservation|case|request|invoice|transaction|tracking|"
    r"session)\s+(number|no\.?|id|#|reference|ref\.?|code)?\s*[:#]?\s*[A-Z0-9][\w-]*\d",
    re.IGNORECASE,
)
_EPHEMERAL_ID = [
    re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b"),  # commit, task, container ids
    re.compile(r"\b(?=[0-9A-F]*\d[0-9A-F]*[A-F])[0-9A-F]{8,}\b"),  # the same in capitals (not DE2987...)
    re.compile(r"\b[a-z]{1,6}_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{3,}\b"),  # rem_8f21c, ch_9XkQ, doc_5521
    re.compile(r"(^|[\s(（])#\d{3,}\b"),  # ticket #48213
    _TICKET_SHAPE,
    _CODE_SHAPE,
    re.compile(
        r"(?<!user's )(?<!my )\b(student|customer|candidate|application|applicant|patient|case|reference|"
        r"ref|meeting|zoom|"
        r"room|validation|verification|request|trace|correlation|transaction|upload|tracking|parcel|shipment)"
        r"\s+(number|no\.?|id|#|code)\s*(is|:|=|#)?\s*[\w-]*\d[\w -]*",
        re.IGNORECASE,
    ),
    re.compile(r"(会议号|会议\\s?ID|房间号|快递单号|运单号)\s*[:：是]?\s*\d[\d ]*"),
    re.compile(r"\b[a-z][\w-]*-(?=[a-z0-9]*\d)[a-z0-9]{5,10}-[a-z0-9]{5}\b"),  # pod names: web-7d9f8c5b-x2k4q
    re.compile(r"\b(?=\w*[a-z])(?=\w*[A-Z])(?=\w*\d)[A-Za-z0-9]{4,}-[A-Za-z0-9]{3,}\b"),  # Zk81-QQ7e
    _ID_WORDS,
    re.compile(
        r"\b(pnr|booking ref(erence)?|record locator|confirmation code|seat)\s*[:#]?\s*[A-Z0-9]*\d[A-Z0-9]*\b",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(referral|invite|invitation|verification|promo|discount|pickup|redeem|access|one-time)\s+code\s*[:#]?"
        r"\s*[A-Za-z0-9-]*\d[A-Za-z0-9-]*|\botp\s*[:#]?\s*\d{4,}",
        re.IGNORECASE,
    ),
    re.compile(r"https?://\S*[?&](token|sig|signature|key|code|session|sid|auth)=\S+", re.IGNORECASE),
    re.compile(r"https?://\S+/(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*[a-z])[A-Za-z0-9]{6,12}\b"),
    re.compile(r"(内推码|邀请码|验证码|取件码|兑换码|取餐码)\s*[:：]?\s*[A-Za-z0-9]+"),
    re.compile(r"(工单|订单|预订|预约|单号|编号|流水号|会话)\s*(号|编号|id|ID)?\s*[:：#]?\s*[A-Za-z0-9][\w-]*\d"),
    re.compile(
        r"\bbatch\s+(no\.?\s*|number\s*|#)?[A-Z0-9]*\d[\w-]*|\blot\s+(no\.?|number|#)\s*[\w-]*\d", re.IGNORECASE
    ),
]
# a capitalised name just before: a product's model ("Rocket Bass RB-110"), unless it names a ticket
_MODEL_BEFORE = re.compile(
    r"\b(?!(Ticket|Issue|Bug|Task|Story|Epic|Case|Invoice|Order|Jira|Linear|See|Ref|PR|MR)\b)[A-Z][A-Za-z]+\s+$"
)
_QUANTITY_BEFORE = re.compile(r"\b(minimum|maximum|min|max|bulk|smallest|largest|first)\s+$", re.IGNORECASE)
_UNIT_AFTER = re.compile(r"\s+[a-z]+s\b")


# A product's model number is short: IC-7300, SGC-237, RS-35M, FT-65R. An id of one order or run is long,
# has several groups (CLS-20261203-0912) or follows a word that names what it identifies ("incident INC-2291").
_MODEL_SHAPE = re.compile(r"[A-Z]{1,5}-\d{2,4}[A-Z]{0,2}")
_ID_BEFORE = re.compile(
    r"(#|\b(order|run|invoice|booking|ref|reference|batch|id|alert|incident|ticket|issue|bug|case|error|job|card|"
    r"log|listing|application|confirmation|receipt|quote|txn|transaction|no\.?|number|code|of)\s*[:#]?\s*"
    r"|编号|单号|订单|收据|[:：])\s*$",
    re.IGNORECASE,
)


def _model_number(found: re.Match[str], before: str) -> bool:
    return bool(_MODEL_SHAPE.fullmatch(found.group(0))) and not _ID_BEFORE.search(before)


def _not_an_id(pattern: re.Pattern[str], text: str, found: re.Match[str]) -> bool:
    """A match of an id shape that is a model number or a quantity."""
    before = text[: found.start()]
    if pattern is _TICKET_SHAPE or pattern is _CODE_SHAPE:
        return bool(_MODEL_BEFORE.search(before)) or _model_number(found, before)
    if pattern is _ID_WORDS:
        return bool(_QUANTITY_BEFORE.search(before) or _UNIT_AFTER.match(text, found.end()))
    return False


def _ephemeral_id(text: str) -> str | None:
    for pattern in _EPHEMERAL_ID:
        for found in pattern.finditer(text):
            if not _STANDARDS.match(found.group(0).strip()) and not _not_an_id(pattern, text, found):
                return found.group(0).strip()
    return None


# one run of one tool: process ids, byte offsets, run/build numbers, hosts of a crash, rows of one file
_DATA_FILE = r"[\w.\-/]+\.(csv|tsv|parquet|jsonl?|xlsx?|txt|log|sql|db|sqlite|xml|avro|orc|gz|zip|dat)\b"
_RUN_DETAIL = re.compile(
    r"\bpid\s*[:=#]?\s*\d+|\(pid\s*\d+\)|\bprocess(\s+id)?\s*#?\s*\d{3,}|\bthread\s+#?\d{3,}"
    r"|\b(byte\s+)?offset\s*[:=]?\s*(0x)?[0-9a-f]{2,}\b|\bat byte\s+\d+|\bposition\s+\d{3,}"
    r"|\bline\s+\d+,?\s+col(umn)?\s+\d+"
    r"|\b(ci |ci-|workflow |pipeline |github actions |gitlab )?(run|build|job|pipeline|workflow|attempt|deploy(ment)?)"
    r"\s*(#|no\.?|number|id)\s*:?\s*#?\d{2,}\b"
    r"|\b(ci|workflow|pipeline|actions)\s+run\s+#?\d{4,}\b|\bbuild\s+#?\d{3,}\b"
    r"|\b0x[0-9a-f]{4,}\b|\.exe\+[0-9a-f]{4,}\b"
    r"|\b(run|job|sync|request|trace|session|upload|activity|submission)\s+(id|#)\s*[:=]?\s*(?=[0-9a-f]*\d)[0-9a-f]{4,}\b"
    r"|\b(activity|submission|sync|upload|message|event|incident|alert|order)\s+#?\d{6,}\b"
    r"|\b(run|job|build|pipeline|workflow|task|attempt|deployment)\s+#?\d{5,}\b"
    rf"|{_DATA_FILE}.{{0,40}}?\b\d[\d,.]*\s*(k|m)?\s+(rows?|lines?|records?|entries|events)\b"
    rf"|\b\d[\d,.]*\s*(k|m)?\s+(rows?|lines?|records?|entries)\s+(in|from|to|into|of|inside)\s+(the\s+)?(file\s+)?{_DATA_FILE}"
    r"|\b\d[\d,]*\s+(readings|records|rows|files|segments|items|entries|photos|messages|lines)\s+(uploaded|imported|"
    r"synced|processed|exported|sent|downloaded|written|deleted|copied|loaded)\b"
    r"|\b(imported|exported|uploaded|synced|loaded|split) (as|into) \d[\d,]*\s+\w+"
    r"|\b(sheet|file|table|csv|spreadsheet|tab|log) has \d[\d,]*\s+(rows|lines|records|entries|columns)\b"
    r"|\b(sync|upload|import|export|backup|scan) (complete|completed|finished|done)\s*:"
    r"|报了\s*\d+\s*(个|条)(问题|错误|警告)"
    r"|\b\d{1,3}(,\d{3})+\s+(rows|records|lines|entries|events)\b|\b\d{5,}\s+(rows|records|lines|entries|events)\b"
    r"|\bon (host|node|server|machine|instance|worker)\s+[\w.-]*\d[\w.-]*\b|\bip-\d+-\d+-\d+-\d+\b"
    r"|\b(did|device id|serial( number)?|s/n|imei|mac)\s*[:=#]?\s*[0-9a-f:]{6,}\b|设备\s*(号|id|ID)\s*[:：]?\s*\d{6,}"
    rf"|(进程号?|PID)\s*[:：#]?\s*\d+|偏移(量)?\s*[:：]?\s*(0x)?[0-9a-fA-F]+|第\s*\d+\s*(字节|次构建|次运行)"
    rf"|(构建|流水线|运行|任务)\s*(号|编号)?\s*[:：#]\s*\d+|{_DATA_FILE}.{{0,20}}?\d[\d,]*\s*(行|条)"
    r"|\b[\w-]*\d{3,}[\w-]*\.(csv|tsv|tiff?|jpe?g|png|heic|cr[23]|nef|arw|dng|raw|log|txt|xlsx?|pdf|json|zip|mp4|mov|wav)\b",
    re.IGNORECASE,
)

# --- time: relative with no anchor, passing states, deadlines, offers, one-off events --------------

_RELATIVE = re.compile(
    rf"\b(today|tonight|tomorrow|yesterday|this (morning|afternoon|evening|week|weekend|month|sprint|quarter|term|"
    rf"semester|season)|by the weekend|over the weekend|"
    rf"(the |user's |their |his |her )next (lesson|meeting|call|session|class|appointment|interview|sprint|step|visit)|"
    rf"tonight's|today's|tomorrow's|yesterday's|this week's|right now|just now|later (today|tonight|this week|on)|"
    rf"earlier (today|this week)|(next|last|coming|following|past) (week|weekend|month|few days|couple of days|"
    rf"{_WEEKDAYS})|the long weekend|in (a|an|one|two|three|a few|\d+([-–]\d+)?) (business |working )?"
    rf"(minutes?|hours?|days?|weeks?)|after (work|lunch|dinner|the meeting|class|school)|"
    rf"at the moment|for now|for the time being|as of now|until further notice|temporar(y|ily)|"
    rf"any (minute|moment) now|soon|shortly|last night('s)?|this past (week|weekend)|so far|"
    rf"just (upgraded|installed|bought|finished|got|received|updated|ordered|submitted|sent|booked|applied|"
    rf"interviewed|did|had)|"
    rf"(by |at |before )?(the )?end of (the |this |next )?(day|week|month|term|sprint|semester)|eod|eow|asap|"
    rf"as soon as possible|urgently|in the future|down the line|later on|sometime|(the )?week after next|"
    rf"(this|the past|the last) hour)\b"
    rf"|今天|今晚|今早|今日|明天|明早|明晚|后天|昨天|昨晚|前天|本周|这周|这个周末|这周末|下周|上周|下个?月|上个?月|"
    rf"这个月|刚才|刚刚|待会|等一下|稍后|过几天|这两天|这几天|目前暂时|暂时|快到了|快要到|就要到|即将|马上就要|昨晚的|尽快|赶紧|抓紧|"
    rf"(上午|下午|晚上|中午)(刚|刚刚|要去|要和|有个|有场)|"
    rf"要在.{{0,6}}(天|周|小时)(内|之内)",
    re.IGNORECASE,
)


def _relative_time(text: str) -> str | None:
    found = _RELATIVE.search(text)
    if not found or _ABSOLUTE_DATE.search(text) or _RECURRING.search(text):
        return None  # "the last Thursday of every month" is a schedule
    return found.group(0).strip()


_PASSING = re.compile(
    r"\b(is|are|am|'m|was|feels?|feeling)\s+(currently |still |really |so |very )?(on vacation|on holiday|on leave|"
    r"away|sick|ill|tired|exhausted|busy|hungry|stressed|bored|in a meeting|running late|off work|out of office|"
    r"jet-?lagged|hungover|annoyed|frustrated|in a hurry)\b"
    r"|\b(exhausted|tired|sick|hungover) (today|now|tonight)\b"
    r"|\b(is|are|am|'m|was|were|feels?|felt|feeling|gets?|got)\s+(so |very |really |pretty |quite |super |a bit |"
    r"kind of |kinda |honestly |a little |too )?(happy|excited|thrilled|nervous|anxious|worried|upset|angry|sad|"
    r"relieved|overwhelmed|burned out|burnt out|stressed out|proud|glad|disappointed|annoyed|exhausted|frustrated)"
    r"\s+((about|by|with|over) (the|this|that|all this|it|today)|that|because)\b"
    r"|\b(has|have|had|got) (a |an )?(headache|cold|fever|migraine|sore throat|hangover|flu)\b"
    r"|\b(is|are|was|were|got|gets|seems|keeps)\s+(still |currently |now |again )?(stuck|jammed|broken|down|offline|"
    r"frozen|hung|retrying|failing|pending|blocked|queued|charging|syncing|rebuilding|resilvering|throttling|"
    r"overheating|unresponsive|flaky|red|processing|uploading|compiling|indexing|deploying|downloading)\b"
    r"(?!\s+(with|until)\b)"
    r"|\b(still|again) (charging|syncing|running|failing|broken|pending|stuck)\b"
    r"|\b(stayed|ran|held|sat|idled|peaked|averaged|hovered|settled)\s+(at|around|near)\s+\d"
    r"|\bfor the (second|third|fourth|fifth|\d+(st|nd|rd|th)) time\b"
    r"|\bstill needs (a|an|to|more|some)\b|\bnot \w+ yet\b|\byet\s*[.!]?\s*$|\bno \w+ yet\b"
    r"|\b(half|almost|nearly|mostly) (done|finished|complete|written|through)\b|\bhalfway (through|done)\b"
    r"|\bstill (incomplete|missing|unfinished|open|unresolved|unanswered|unpaid|empty|undecided)\b"
    r"|\b(is|are|am) currently (reading|writing|debugging|fixing|reviewing|editing|drafting|preparing|grading|"
    r"marking|testing|migrating|rewriting|refactoring|waiting|looking|interviewing|applying)\b"
    r"|\b(behind|ahead of) schedule\b|\bis taking (longer|forever|ages|a while)\b"
    r"|(写|改|做|弄|跑)了?一半|进度(落后|滞后)"
    r"|\b(is|are) (on|at) (the )?(first|second|third|final|last|\d+(st|nd|rd|th)) (pass|round|draft|revision|"
    r"iteration|attempt|step|stage)\b"
    r"|\b(has|have) (applied|sent|submitted|pitched|queried) (to )?\d+\b|(投|发|寄|交)(给)?了\s*\d+\s*(家|份|个|封)"
    r"|(推荐|发|给|找|列|投|面|拿到|收到|做)了?\s*\d+\s*(个|家|份|条|场|次|封|道)"
    r"|\b(code|led|display|screen|counter|meter|gauge)s? (shows|showed|displays|reads|read)\b"
    r"|\b(read|reads|showed|measured|registered|logged)\s+\d+(\.\d+)?\s?(°|%|kg|km|bpm|ms|fps)"
    r"|\b(is|are|was|were|shows?|has|have) (a |an |still |currently )?(pending|in progress|in transit|"
    r"out for delivery|on hold|under review|awaiting)\b"
    r"|(飙到|涨到|降到|升到|跌到|掉到)\s*\d|还没(有)?(到|来|回|发|收到|好|修好|回复|出来|出|定|消息|结果|通知)"
    r"|还差|还没(改|写|做|弄|跑|装)完|(改|写|做|弄|跑|装|修)完了|卡(住|在)了?|又(挂|坏|卡|崩)了"
    r"|\b(currently|right now|at present|still) (failing|broken|down|offline|unavailable|building|deploying|"
    r"blocked|waiting|away|traveling|travelling|sick|red)\b"
    r"|\b(is|are) (down|offline|failing|broken|red) (right now|again|at the moment)\b"
    r"|\b(rssi|snr|signal strength|latency|ping)\s*(is|of|=|:)?\s*-?\d+(\.\d+)?\s*(dbm|db|ms)?\b"
    r"|(信号强度|延迟)\s*\S{0,4}\s*(为|是|=|:|：)\s*-?\d+"
    r"|\b(hit|reached|peaked at|spiked to|dropped to|climbed to|maxed out at)\s+\d+(\.\d+)?\s?(°\s?[cf]|%|ms|fps|gb|mb)"
    r"|\b(is|are|stands at) (now|currently) (at )?\d[\d,.]*\s*(k\s)?(words|pages|%|rows|items|files|lines|chapters)\b"
    r"|(现在|目前|当前)\s*(有|共|一共|已经有|已有|写了|是)\s*\d+\s*(字|页|行|条|个文件|%)"
    r"|\b(is|are) (still )?waiting (for|on)\b|(在|正在)等(待)?.{0,12}?"
    r"(结果|回复|通知|offer|消息|审核|批准|答复|review|合并|处理|确认)"
    r"|已(投|发|完成|处理|提交|导入|写)了?\s*\d+|\b\d+ of \d+ (done|complete|finished|processed|sent|applied)\b"
    r"|\b\d+(\.\d+)?\s?%\s+(used|full|free|utili[sz]ed|done|complete|busy|idle|cpu|memory|ram|disk|load)\b"
    r"|\b(cpu|memory|ram|disk|load|usage|battery)\s+(is\s+|at\s+|is at\s+)\d+(\.\d+)?\s?%"
    r"|\b(still|only) \d+ [\w-]+( \w+)? (left|remaining|to go|pending)\b|\b\d+ [\w-]+ (left|remaining) (in|on|to)\b"
    r"|(还|仍然|仍)(有|剩|剩下)\s*\d+\s*(张|个|条|篇|项|份|页|章|节|处|次)|(使用率|占用|已用)\s*\d+(\.\d+)?\s*%"
    r"|(正在|在)(休假|度假|出差|开会|生病)|(很|有点|好)?(累|困|饿|忙|烦|不舒服)(了|死了)(?!解)|(生病了|感冒了|发烧了)|"
    r"(现在|目前|暂时)(挂了|宕机|不可用|失败|报错|打不开)"
    r"|(现在|当前|目前|此刻)[^，。,；;]{0,15}?(是|为|显示|有|:|：)?\s*-?\d[\d.,]*\s*(克|千克|公斤|度|°C|℃|%|次|帧|FPS|fps|ms|毫秒)"
    r"|(现在|当前|目前|此刻)[^，。,；;]{0,15}?(FPS|fps|帧率|温度|电量|湿度|网速|延迟|下载量|播放量)\s*(是|为|:|：)?\s*\d"
    r"|(还|仍然|仍)(有|剩|剩下)[^，。,；;\d]{1,8}\d+\s*(个|颗|张|盒|克|条|瓶|袋|件|份|斤)"
    r"|还在(下载|上传|安装|编译|同步|处理|加载|更新|排队|审核)|已经\s*\d+(\.\d+)?\s*%"
    r"|已经\S{0,3}了?\s*(一个半|半|\d+|[一二三四五六七八九十两]+)\s*个?(小时|分钟|秒)"
    r"|(快|要)(疯|崩溃|气死|累死|烦死)了|搞得.{0,6}(疯|崩溃|头疼|头大)"
    r"|(好|太|真)(累|困|烦)(?![计积])|(腿|眼睛|脑子|头|手)都(软|花|大|晕|疼|酸|麻)了"
    r"|\b(usage|used)\b[^.;]{0,30}?\d[\d,.]*\s*(k|m)?\s+(of|/)\s+\d"
    r"|(现在|目前|已经|才)(报|报名|来|到|收|签|卖|交)了\s*\d+"
    # a feeling of the moment, whatever follows it ("is fed up with the dust", "is nervous about headlining")
    r"|\b(is|are|am|'m|was|were|feels?|felt|feeling)\s+(so |very |really |pretty |quite |super |a bit |kind of |"
    r"kinda |honestly |a little |too )?(fed up|panicking|panicky|freaking out|nervous|anxious|worried|scared|"
    r"dreading|overwhelmed|stressed out|thrilled|upset|relieved)\b"
    r"|\b(user|he|she|they|we) (hopes|hoped|is hoping|wishes) (that |the |it |this |they |we |everything )"
    r"|觉得.{0,20}?(很|有点|太|好|挺)(累|烦|辛苦|紧张|焦虑|头疼|崩溃|麻烦)|(?<!会)(有点|很|非常|特别|挺)(担心|紧张|焦虑)"
    # a reading of one moment: what a tool shows now, a queue, a streak, a balance, a parcel on its way
    r"|\b(shows|showed|displays|displayed)\s+[^.;]{0,40}?\d"
    r"|\b\d[\d,.]*\s+[\w-]+( [\w-]+)?\s+(available|waiting|queued)( now| today)?\b"
    r"|\bstreak (is|of|at|:)\s*\d+|(\bbalance|余额)\s*(is |of |:|：)?\s*[$€£¥]?\s*\d"
    r"|运输中|派送中|配送中|已揽收|待揽收|已签收"
    # a reaction to one delivery or one day
    r"|\bmade (the user's|my|his|her|their|our) (day|week|month)\b|\bwhat an? (monday|day|week|morning|night)\b"
    r"|\b(is|are|am|was|were) (exasperated|delighted|ecstatic|over the moon|gutted|devastated|livid)\b"
    r"|(说|表示|回复)[^。]{0,20}(谢谢|感谢|太美了|太好了|很满意)"
    r"|\b(in|over|during) the (last|past) \d+\s*(h|hrs?|hours?|min(ute)?s?)\b",
    re.IGNORECASE,
)

# an instrument's or a tool's reading: live values, a reading with its clock time, a step of a cycle, a tally
# of statuses, a value in scientific notation, "this time" / "just measured", a forecast, a countdown. Beside
# a target word it is a standing threshold instead ("readings above 140/90 mean a call to the GP").
_READING = re.compile(
    r"\blive ([a-z]+ )?(data|readings?|values?|stats)\b|\breadings?\b[^.;]{0,40}\d"
    r"|\b(was|were|read|measured)\s+[-+]?\d[\d.,]*\s?[a-z%°/]{0,6}\s+at\s+\d{1,2}[:.]\d{2}\b"
    r"|\b\d{1,2}:\d{2}\s*[:：]\s*\d{2,3}/\d{2,3}\b|\b(step|stage|phase|cycle)\s+\d+\s*/\s*\d+\b"
    r"|:\s*\d[\d,]*\s+(unsolved|pending|open|new|solved|closed|breached|failed|passed|queued|errors?|warnings?|skipped)"
    r"\b[^.;]{0,20},\s*\d"
    r"|(?<![\w.])\d(\.\d+)?e[+-]?\d{1,2}\b"
    r"|(这次|这回|本次|刚测|刚量|刚才测)[^，。,;；]{0,12}\d|天气预报|\bweather forecast\b|降水概率|\bchance of rain\b"
    r"|还有\s*\d+\s*(天|周|个?星期|个?月|小时)|\b\d+ (days|weeks|hours|sleeps) (to go|left)\b"
    r"|\b(the )?(last|latest|previous|most recent) (ride|run|trip|walk|drive|charge|workout|session|reading|test|"
    r"measurement|shoot|batch)\s+(was|were|took|lasted|came to)\s+[^.;]{0,20}\d",
    re.IGNORECASE,
)
_COUNT_NOW = re.compile(
    r"\b(word count|page count|row count|line count|file size|size|total)\s+"
    r"(is|was|:|=|after|now)\b.{0,30}\d",
    re.IGNORECASE,
)
_TARGET = re.compile(
    r"\b(target|limit|max|maximum|minimum|at most|at least|under|below|above|goal)\b|目标|上限|不超过", re.IGNORECASE
)


# a popularity count read off a page at one moment; with a date it is a milestone ("reached 100,000 in 2025")
_POPULARITY = re.compile(
    r"\b(has|have|had|got|reached|hit|passed|crossed)\s+(about |over |nearly |almost )?\d[\d,.]*\s*k?\s+"
    r"(stars|downloads|followers|subscribers|views|forks|likes|endorsements|installs|visits|clicks|upvotes)\b"
    r"|\d+\s*(次|个)?(下载|播放|浏览|点赞|收藏|关注|粉丝)(量)?",
    re.IGNORECASE,
)


def _passing(text: str) -> str | None:
    found = _PASSING.search(text) or (
        None if _TARGET.search(text) else _READING.search(text) or _COUNT_NOW.search(text)
    )
    if not found and not _ABSOLUTE_DATE.search(text):
        found = _POPULARITY.search(text)
    if not found or _RECURRING.search(text):
        return None  # "down for maintenance every first Saturday" is a schedule
    return found.group(0).strip()


_DEADLINE = re.compile(
    rf"\b(is|are|was|were)\s+due\s*([.,;]|$)|\bdue\s+(on|by|next|this|tomorrow|today|tonight|soon|{_WEEKDAYS})\b"
    r"|\bthe deadline\b|\bdeadline (is|was|for)\b|\b(has|have|needs?) to be (done|finished|submitted|sent|in|ready|"
    r"marked|returned) (by|before)\b"
    r"|截止(日期|时间)?(是|在|为)?|(必须|需要|要)在.{0,8}(之前|前)(完成|提交|交)|到期|(本|这个?)?月底(前|之前)|(周|星期|礼拜)[一二三四五六日天](前|之前)|(周末|月底|年底|下班|放假)之?前",
    re.IGNORECASE,
)


def _deadline(text: str) -> str | None:
    found = _DEADLINE.search(text)
    if not found or _anchored(text):
        return None
    return found.group(0).strip()


_OFFER = re.compile(
    r"\b(on offer|on sale|discount(ed)?|promo( code)?|coupon|voucher|limited[- ]time|special offer)\b"
    r"|(打折|促销|优惠券|特价|限时)",
    re.IGNORECASE,
)
_EXPIRY = re.compile(
    r"\b(valid (until|till|through|for \d+ (minutes|hours|days))|expir(es|ing|ed|y)"
    r"|until \d{1,2}(:\d{2}|\s?(am|pm)))\b"
    r"|有效期至|过期|有效期\s*(只有|为|是)?\s*\d+\s*(小时|天|分钟)|(明天|今天|马上)就?失效",
    re.IGNORECASE,
)


def _expiring(text: str) -> str | None:
    """An offer always passes; an expiry passes too unless it has a date (a passport that expires in
    2028 is a fact)."""
    found = _OFFER.search(text)
    if found:
        return found.group(0).strip()
    found = _EXPIRY.search(text)
    return found.group(0).strip() if found and not _ABSOLUTE_DATE.search(text) else None


_ONE_OFF_NOUN = (
    r"flight|train|bus|ferry|appointment|meeting|call|booking|reservation|check-?in|pick-?up|"
    r"delivery|interview|dinner|lunch|party|viewing|visit|haircut|concert|show"
)
_ONE_OFF_EVENT = re.compile(
    rf"\b(on|this|next|last|coming|by|until|before|after|for)\s+({_WEEKDAYS})\b(?!s)"
    rf"|\b({_WEEKDAYS})\s+(at\s+)?\d{{1,2}}([:h.]\d{{2}}|\s?(am|pm))\b"
    rf"|\b(arrives?|ships?|lands?|starts?|ends?|opens?|closes?|is due|due|leaves?|returns?)\s+({_WEEKDAYS})\b(?!s)"
    rf"|\b({_ONE_OFF_NOUN})\b.{{0,40}}(\b\d{{1,2}}[:h]\d{{2}}\b|\b\d{{1,2}}\s?(am|pm)\b)"
    rf"|(这|下|上)(个)?(周|星期|礼拜){_ZH_DAY}|约(了|好)?(在)?(这|下|本)?(个)?(周|星期|礼拜){_ZH_DAY}|(航班|火车|高铁|预约|会议|面试|聚餐).{{0,12}}\d{{1,2}}[:：点]\d{{0,2}}",
    re.IGNORECASE,
)


def _one_off_event(text: str) -> str | None:
    found = _ONE_OFF_EVENT.search(text)
    if not found or _anchored(text):
        return None
    return found.group(0).strip()


# a tally of one period or one run: three or more amounts with decimals ("income 14,250.00, net 10,337.60")
_AMOUNT = re.compile(
    r"(?<![\w.,])[-+−]?\d{1,3}(,\d{3})+(\.\d{1,2})?(?![\d.])|[£$€¥]\s?\d[\d,.]*"
    r"|\b\d[\d,]*\.\d{2}\s?(eur|usd|gbp|chf|cny|rmb|jpy|元|欧元|美元|英镑)"
)


# amounts that are a standing price list or terms, not a tally of one period
_PRICE_LIST = re.compile(
    r"\b(prices?|pricing|price list|rates?|fees?|tiers?|wholesale|retail|per|each|free shipping)\b|价格|售价|定价|每",
    re.IGNORECASE,
)


def _figures(text: str) -> str | None:
    amounts = _AMOUNT.findall(text)
    if len(amounts) < 3 or _PRICE_LIST.search(text):
        return None
    return f"{len(amounts)} amounts"


# --- requests, maybe-intentions, the session's topic -------------------------------------------------

_REQUEST = re.compile(
    r"\b(asked|asks|requested|requests)\s+(the |an? )?(assistant|agent|ai|bot|you|me|it|for|to|about|how|what|"
    r"whether|if|help)\b"
    r"|\b(wants|wanted|would like|needs|needed) (to know|to find out|to learn how|help|a quick|an? (summary|"
    r"translation|list|draft|email|reply|recipe|suggestion|recommendation|explanation))\b"
    r"|\bhelp (with|me|them|him|her)\b"
    r"|\b(is|are|am|was|were) (looking for|trying to|searching for|shopping for|wondering|deciding whether)\b"
    r"|^\s*(please|can you|could you|would you|let'?s|book|find|remind|check|translate|summari[sz]e|convert|"
    r"calculate|look up|search|draft|write me|tell me|show me|give me)\b(?!\s+(is|was|are|were|has|had|of)\b)"
    r"|^\s*(请|麻烦|劳驾|能不能|能否|可以帮|你能|帮我|给我|替我)|(用户|他|她)(请|让|要求|请求|叫|麻烦|拜托)(助手|你|AI)"
    r"|(用户|他|她)?想(知道|了解|问)|^\s*(用户|他|她)(问|询问)|(问了|询问了?|咨询了?)(助手|一下)?|请助手|帮忙(查|找|写|翻译|看)"
    r"|(想|要)?(让|叫|要)助手|(请|麻烦|让|叫|要)用户(帮|给|再|把|做|选|报)|\basked the user to\b",
    re.IGNORECASE,
)
_TODO = re.compile(
    r"\b(needs|has|have|need|must|should|got) to (email|call|phone|text|send|reply|book|buy|pay|renew|submit|finish|"
    r"fix|chase|ask|print|upload|sign|return|cancel|order|contact|write|prepare|pick up|drop off|schedule|follow up|"
    r"remind|collect|post|ship|file|confirm)\b"
    r"|\b(wants?|needs?|would like) (a|an|some) [\w-]+( [\w-]+)? (for|about|on) (the|this|her|his|their|my|tomorrow|"
    r"next|tonight)\b"
    r"|(要|得|需要)(给|跟|和).{1,8}(发|打|回|写)|记得(要)?(给|去|把|买|交|回)",
    re.IGNORECASE,
)


def _todo(text: str) -> str | None:
    found = _TODO.search(text)
    if not found or _anchored(text):
        return None  # "has to renew the passport by 2028-08-31" is a dated plan
    return found.group(0).strip()


_DURABLE_WISH = re.compile(
    r"\b(always|every|everything|all|any|never|by default|default|from now on|"
    r"going forward|in general|whenever|each)\b"
    r"|始终|总是|一直|每次|所有|以后都|从现在起|今后|默认|永远|都用|都要",
    re.IGNORECASE,
)


def _request(text: str) -> str | None:
    found = _REQUEST.search(text)
    if not found or _DURABLE_WISH.search(text):
        return None  # "wants British English in everything" is a preference, not a request
    return found.group(0).strip()


_MAYBE = re.compile(
    r"\b(maybe|perhaps|possibly|might|may want to|someday|some day|one day|next time|at some point|eventually|"
    r"sooner or later|thinking (about|of)|considering|toying with|not sure (if|whether)|if time permits)\b"
    r"|\b(will|'ll|is going to|are going to|plans? to|intends? to|wants? to)\b.{0,60}\b(later|soon|sometime|"
    r"when (they|he|she|i|we) (have|get) (time|a chance)|afterwards|after (that|this))\b"
    r"|\b(user|they|he|she|we|i) (will|'ll|is going to|are going to) (?!(always|never|be|have|need|keep)\b)[a-z]+\b"
    r"|\b(plans?|intends?|wants?|hopes?|is going|are going) to\b.{0,60}\b(once|when|after|if|as soon as|before)\b"
    r"|\bwants? to try\b|\bone of these (days|weekends|evenings)\b"
    r"|\bmay (look|try|switch|move|consider|add|start|want|use|write|apply)\b"
    r"|\b(user|they|he|she|i|we) may (?!(not|also|only|be|have|need)\b)[a-z]+\b"
    r"|\bmay (?!(not|also|only|be|have|need)\b)[a-z]+\b[^.;]{0,40}"
    r"\b(next|this coming) (week|month|quarter|year|term|season)\b"
    r"|也许|或许|说不定|可能会|可能要|改天|下次|有空(再|的话|的时候)|以后再|回头再|考虑(一下|要不要|是否)|想试试|打算以后"
    r"|(想|打算|准备|计划)(先|等|过段时间|过阵子)|先.{1,12}再|(打算|准备)(?!长期|一直)"
    r"|考虑(以后|将来|转|换|去)|考虑.{0,10}?(要不要|是否|是不是)|有机会(的话)?|将来(可能|也许|想)|纠结|犹豫|还没(决定|想好)"
    r"|(几天|一阵子?|一段时间|一下)再|休息(几天|一下|一阵)|可能(会)?(考虑|想|打算)|可能\S{0,6}想",
    re.IGNORECASE,
)


def _maybe(text: str) -> str | None:
    found = _MAYBE.search(text)
    if not found or _anchored(text[: found.start()] + " " + text[found.end() :]):
        return None  # "will defend the thesis on 12 June 2027" is a dated plan, a fact
    return found.group(0).strip()


_SESSION_TOPIC = re.compile(
    r"\b(conversation|question|chat|session|discussion|request|topic|this thread)\s+(was|is|were)\s+(about|on|"
    r"regarding)\b|\b(user|they|he|she) asked (about|how|what|why|whether|if)\b"
    r"|(对话|会话|这次聊天|问题)(是)?(关于|围绕)|用户(询问|问)了?(关于|如何|怎么|为什么)",
    re.IGNORECASE,
)

# --- English grammar: past events and labels (never applied to CJK text) ---------------------------

_IRREGULAR_PAST = (
    "ran|got|wrote|fell|rose|went|saw|took|began|ate|flew|grew|knew|drove|drew|broke|chose|gave|spent|"
    "came|became|spoke|stole|threw|woke|wore|sank|sang|swam|shook|forgot|froze|hid|bit|tore"
)
_PAST_EVENT = re.compile(
    rf"\b({_IRREGULAR_PAST})\b"
    r"|\b(was|were)\s+(\w+ly\s+)?(\w+ed|sent|built|made|run|done|set|put|cut|hit|shut|split|rebuilt|"
    r"rerun|reset|found|lost|paid|sold|told|kept|left|given|taken|written|broken|shown|seen)\b(?!\s+(by|in|as|from)\b)"
    r"|\b(was|were)\s+(about |around |only |just )?\d[\d,.]*\s*(%|words|pages|lines|rows|files|items|ms|s|sec|"
    r"seconds|minutes|min|mb|gb|kb|tb|k|x|times|°)(?!\w)|\b(crashed|panicked|segfaulted|oom-?killed)\b"
    r"|\b(arrived|shipped|got delivered|was delivered|timed out|rolled back|sent back|came back|went down|bounced|"
    r"fell through|got cancell?ed|was cancell?ed|was postponed|got postponed|failed to)\b"
    r"|(?-i:\b[a-z]\w*ed)\s+\d+\s+(?!(years|months|weeks|days|hours|has|was|is)\b)[a-z]+s\b"
    r"|(^|\s)[\w:./-]*\d[\w:./-]*\s+(started|stopped|finished|completed|deployed|failed|crashed|exited|"
    r"restarted|created|deleted|succeeded|timed out)\b",
    re.IGNORECASE,
)
_HISTORY = re.compile(
    r"\b\d+ (years|decades|centuries|generations)\b"
    r"|\b(years|decades|centuries) (ago|before|earlier)\b"
    r"|\b(as a child|in (his|her|their) youth|when (he|she|they) was)\b",
    re.IGNORECASE,
)
# a change of state told once is the new state ("took over the compost; Dana no longer does it")
_STATE_CHANGE = re.compile(
    r"\b(no longer|not any ?more|any ?more|took over|instead of)\b"
    r"|\b(moved|switched|changed|shifted|went( back)?) to (every|each|weekly|daily|monthly)\b",
    re.IGNORECASE,
)
_DECISIONS = {"chose"}  # the past verbs _PAST_EVENT finds that state a standing choice
_CONDITION_BEFORE = re.compile(r"\b(unless|if|whenever|in case|once)\b[^.;]{0,40}$", re.IGNORECASE)
_BE_OR_HAVE = re.compile(r"\b(is|are|am|be|been|being|has|have|had|get|gets)\s+(\w+ly\s+)?\w+ed\b", re.IGNORECASE)


# Chinese: a change that happened once, told with a completed-action ending ("出差取消了")
_ZH_PAST = re.compile(
    r"(被)?(取消|推迟|延期|改期|结束|完成|失败|崩溃|中断|挂掉?|宕机|重启|发出|寄出|送达|退款|超时)了"
    r"\s*[。.！!]?\s*$"
    r"|(刚刚|刚才|已经)\S{0,8}(取消|推迟|失败|崩溃|中断|挂|宕机|重启|发出|寄出|送达)了"
    r"|[了过]一次|刚(刚)?(买|到|装|换|收到|提交|发|下单|把)|刚(刚|才)?[^\s，。,]{1,4}(了|完)"
    r"|被(筛|拒|挂|刷|取消|退回|驳回|拒绝|淘汰|删|限流|封)\S{0,2}了|被问(到|了)|忘(了|记了)"
)


def _past_event(text: str) -> str | None:
    if not _en(text):
        found = _ZH_PAST.search(text)
        return found.group(0).strip() if found else None
    found = _PAST_EVENT.search(text)
    if not found or _ABSOLUTE_DATE.search(text) or _HISTORY.search(text) or _STATE_CHANGE.search(text):
        return None  # a dated past event is history ("emigrated in 1952", "published in 2019"), not the session
    word = found.group(0).strip()
    if word.lower().endswith("ed") and _BE_OR_HAVE.search(text) and " " not in word:
        return None
    if word.lower() in _DECISIONS or _CONDITION_BEFORE.search(text[: found.start()]):
        return None  # "chose LVT for the kitchen" is a decision; "unless the jar arrived broken" a rule
    return word


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
_SUBJECTS = set(
    """user he she it they we team company family partner wife husband son daughter client customer
boss manager school app service""".split()
)
_AFTER_VERB = set(
    """
in on at to for with from by into onto via over under about as the a an all every each its their his her our my
your only always never no some any more less up out off down back it them him us
""".split()
)


_VERBS.update(_IRREGULAR_PAST.split("|"))
_VERBS.update("see sees visit visits".split())
# adverbs that may stand between a subject and its verb ("User now sees Dr. Tan every six months")
_ADVERBS = set("now still also usually only just often always never rarely sometimes mostly already".split())
_VERBS.update("died left lost paid sold told kept held met led fought won became spent".split())


def _has_verb(words: list[str]) -> bool:
    lowered = [w.lower().strip(".,;:!?") for w in words]
    lowered = [w.split("-", 1)[1] if w.startswith(("re-", "co-")) else w for w in lowered]  # re-reads
    if any(w in _VERBS for w in lowered):
        return True
    # an -s / -ed form right after a subject ("User bakes bread ..."), or followed by what follows verbs
    # ("Orbit Freight signs in", "orders groceries online")
    plain = [w for w in lowered if w not in _ADVERBS]
    for before, word in zip(plain, plain[1:], strict=False):
        if before in _SUBJECTS and word.isalpha() and len(word) > 3 and word.endswith(("s", "ed")):
            return True
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


def _bare_topic(text: str) -> str | None:
    """A label with no statement ("Quarterly revenue figures table"); a list of named things is a fact."""
    # any CJK: its verb may be Chinese (对比, 使用), which an English verb list cannot see
    if (
        CJK_RUN.search(text)
        or _ABSOLUTE_DATE.search(text)
        or re.search(r"[,:;=()&+/，：；、（）]|\band\b|\bor\b|->", text)
    ):
        return None
    words = words_of(text)
    return None if _has_verb(words) else "no verb"


# --- size ---------------------------------------------------------------------------------------------


def words_of(text: str) -> list[str]:
    return _WORD.findall(text)


def size(text: str) -> int:
    """Words of alphabetic text plus one word per two CJK characters (Chinese has no spaces)."""
    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    latin = len(words_of(CJK_RUN.sub(" ", text)))
    return latin + (cjk + 1) // 2


def _too_short(text: str) -> str | None:
    n = size(text)
    if n < 3 or (not CJK_RUN.search(text) and len(text) < 12):
        return f"{n} words"
    return None


def _too_long(text: str) -> str | None:
    return f"{len(text)} characters" if len(text) > MAX_FRAGMENT_CHARS else None


# --- the solutions path -------------------------------------------------------------------------------

# a fix: an arrow from problem to remedy, a word that names one, or a remedy verb opening a clause
_FIX = re.compile(
    r"->|→|=>|⇒|\b(fix(es|ed)?|solution|solved?|workaround|resolved?|instead|because|caused by|the cause|"
    r"to avoid|so that)\b"
    r"|(^|[.;:,!?—–]\s*|\b(then|and|or|just|must|should)\s+)(use|set|add|run|install|upgrade|downgrade|replace|"
    r"remove|delete|enable|disable|configure|pin|increase|raise|lower|pass|change|switch|wrap|mount|export|"
    r"restart|rebuild|clear|reset|allow|create|rename|point|update|bump|apply)\b"
    r"|解决|改用|改成|换成|设置|添加|加上|安装|升级|降级|配置|删除|清除|重启|原因|因为|导致|需要先|应该",
    re.IGNORECASE,
)


def _solution_too_short(text: str) -> str | None:
    n = size(text)
    return f"{n} words" if n < 6 else None


def _solution_too_long(text: str) -> str | None:
    return f"{len(text)} characters" if len(text) > MAX_SOLUTION_CHARS else None


def _no_fix(check: Callable[[str], str | None]) -> Callable[[str], str | None]:
    """Output that carries no remedy: a solution may quote an error or a status line, but only with its fix."""

    def gated(text: str) -> str | None:
        found = check(text)
        if found is None or _FIX.search(_TOOL_STATUS.sub(" ", text)):
            return None
        return found

    return gated


# a path in one person's home (/home/kim/...) or in a temp folder; `~/.cache` is the same for everyone
_HOME = re.compile(r"(^|[\s(\"'`])(/home/|/Users/|/tmp/|/root/)[\w.-]+")


def _agent_action(text: str) -> str | None:
    for pattern in (_AGENT_SUBJECT, _VERB_FIRST, _ZH_AGENT):
        found = pattern.search(text)
        if found:
            return found.group(0).strip()
    return None


FRAGMENT = ("fragments",)
SOLUTION = ("solutions",)
BOTH = ("fragments", "solutions")

# Order matters only for which name a candidate that breaks several rules is given.
RULES: list[Rule] = [
    Rule("too_short", FRAGMENT, _too_short, "too short to be a fact"),
    Rule("too_long", FRAGMENT, _too_long, "too long for one memory (a summary or a dump, not a fact)"),
    Rule("too_short", SOLUTION, _solution_too_short, "too short to be a problem and its solution"),
    Rule("too_long", SOLUTION, _solution_too_long, "too long for one memory (a summary or a dump)"),
    Rule("greeting", BOTH, _any(_GREETING), "greeting or small talk"),
    Rule("date_only", FRAGMENT, _any(_DATE_ONLY), "only says what day or date it is"),
    Rule("agent_action", BOTH, _agent_action, "what the agent did in this session"),
    Rule(
        "tool_status",
        BOTH,
        _no_fix(_any(_TOOL_STATUS)),
        "a tool's status line echoed back (`$ cmd`, `[exit code 1]`, `Container x Started`), with no fix",
    ),
    Rule("command_output", FRAGMENT, _any(_COMMAND_OUTPUT), "command or test output, logs, timings"),
    Rule("command_output", SOLUTION, _no_fix(_any(_COMMAND_OUTPUT)), "command or test output with no fix"),
    Rule("raw_error", FRAGMENT, _any(_RAW_ERROR), "a raw error string"),
    Rule("raw_error", SOLUTION, _no_fix(_any(_RAW_ERROR)), "a raw error string with no fix"),
    Rule("figures", FRAGMENT, _figures, "a tally of one period or run: several amounts"),
    Rule("calculation", FRAGMENT, _any(_CALCULATION), "a conversion or computed value, not about the user"),
    Rule(
        "local_coordinate",
        FRAGMENT,
        _any(_LOCAL),
        "machine-local: localhost, ports, private IPs, home/temp/container paths, file lines",
    ),
    Rule("local_coordinate", SOLUTION, _any(_HOME), "a path in one person's home or temp folder"),
    Rule("ephemeral_id", FRAGMENT, _ephemeral_id, "a generated id (reminder, ticket, booking, commit, task)"),
    Rule(
        "run_detail",
        FRAGMENT,
        _any(_RUN_DETAIL),
        "one run of one tool: a process id, byte offset, run or build number, crash host, rows of one file",
    ),
    Rule("relative_time", FRAGMENT, _relative_time, "relative time with no date: today, tonight, next week"),
    Rule("passing_state", FRAGMENT, _passing, "a passing state: tired, on vacation, currently down"),
    Rule("deadline", FRAGMENT, _deadline, "a deadline with no date and no recurrence"),
    Rule("expiring_offer", FRAGMENT, _expiring, "an offer, coupon or anything that expires"),
    Rule("one_off_event", FRAGMENT, _one_off_event, "a one-off event on one weekday or at one time"),
    Rule("one_off_request", FRAGMENT, _request, "a one-off request, not a lasting preference"),
    Rule("to_do", FRAGMENT, _todo, "a one-off task for the user to do, with no date"),
    Rule("maybe_intention", FRAGMENT, _maybe, "a maybe or a some-day intention with no date"),
    Rule("session_topic", FRAGMENT, _any(_SESSION_TOPIC), "what the conversation was about"),
    Rule("past_event", FRAGMENT, _past_event, "a one-time event of the session, not a standing fact"),
    Rule("bare_topic", FRAGMENT, _bare_topic, "a topic or label, not a statement"),
]


def rules_for(area: str) -> list[Rule]:
    return [r for r in RULES if area in r.areas]
