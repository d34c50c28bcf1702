"""The quality gate: each rule by example (not the eval strings), grounding, echo, and the eval figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memctl.quality import REASONS, Grounding, check, parse_recalled, split_recalled
from memctl.transcripts import Message
from tests.conftest import REPO

DURABLE = [
    "User's name is Jonas and he works as a data engineer at a logistics startup",
    "User prefers tabs over spaces in Go code",
    "The team's main branch is protected; every change needs one approving review",
    "User is allergic to shellfish",
    "User speaks German and English; answers should be in German",
    "User's blog is built with Hugo and hosted on Netlify",
    "User has two kids, aged 5 and 8",
    "User runs every Saturday morning with a local club",
    "User works Monday to Thursday; Fridays are off",
    "User wants all commit messages in Conventional Commits format",
    "Team uses Python 3.12 and uv for dependency management",
    "User's birthday is 3 March",
    "The product's public API is versioned under /v2",
    "Acme's workspace signs in with Azure AD SAML SSO",
    "User's standup is every weekday at 9:30",
    "User's gym classes are Tuesdays at 18:00",
    "Staging environment is deployed from the develop branch",
    "The Flask app is being retired",
    "User currently lives in Lisbon",
]

TRANSIENT = [
    ("Hi", "too_short"),
    ("User said good morning and thanked the assistant", "greeting"),
    ("Today is Tuesday, 4 March", "date_only"),
    ("I ran the migrations and they succeeded", "agent_action"),
    ("The assistant created a new branch feature/login", "agent_action"),
    ("Created a virtualenv for the project", "agent_action"),
    ("All 42 tests passed in 3.1s", "command_output"),
    ("Build failed with exit code 2", "command_output"),
    ("FileNotFoundError: config.yaml not found", "raw_error"),
    ("100 USD is about 92 EUR", "calculation"),
    ("User's laptop stores the project at /Users/kim/code/shop", "local_coordinate"),
    ("API server listening on http://localhost:3000", "local_coordinate"),
    ("Postgres container exposed on port 5433", "local_coordinate"),
    ("The staging database has 3 stuck jobs", "local_coordinate"),
    ("Commit a3f9c21 fixed the login bug", "ephemeral_id"),
    ("Order ORD-99812 is on its way to the user", "ephemeral_id"),
    ("User has a dentist appointment tomorrow at 10am", "relative_time"),
    ("User is tired today", "relative_time"),
    ("User's flight lands at 14:35", "one_off_event"),
    ("User asked the assistant to summarise the meeting notes", "one_off_request"),
    ("User wants to know how to reverse a list in Python", "one_off_request"),
    ("User will send the report to the client soon", "relative_time"),
    ("Container web-1 restarted", "tool_status"),
    ("Quarterly revenue figures table", "bare_topic"),
    ("3 files changed, 45 insertions(+)", "command_output"),
    ("pytest collected 214 items", "command_output"),
    ("The build is currently failing", "passing_state"),
    ("Weather in Paris is 18 °C and sunny today", "relative_time"),
    ("The conversation was about Docker volumes", "session_topic"),
    ("User is looking for a birthday present for her sister", "one_off_request"),
    ("Dev DB contains 40 test users", "local_coordinate"),
]


@pytest.mark.parametrize("text", DURABLE)
def test_durable_facts_pass(text):
    verdict = check(text)
    assert verdict.ok, (verdict.reason, verdict.detail)


@pytest.mark.parametrize("text, reason", TRANSIENT)
def test_transient_items_are_gated_with_their_reason(text, reason):
    verdict = check(text)
    assert verdict.reason == reason, (verdict.reason, verdict.detail)
    assert verdict.reason in REASONS


def test_solutions_keep_errors_commands_and_config_paths():
    text = (
        "pip install times out with ReadTimeoutError behind the corporate proxy -> set proxy and "
        "index-url in /etc/pip.conf, timeout = 60"
    )
    assert check(text, "solutions").ok
    assert check("pip fails -> fix it", "solutions").reason == "too_short"
    assert (
        check("Build breaks on the laptop -> delete /home/kim/.cache/pip and rerun the build", "solutions").reason
        == "local_coordinate"
    )


def _grounding(*messages: tuple[str, str], **options):
    return Grounding.from_messages([Message(role, text) for role, text in messages], **options)


def test_ungrounded_inventions_are_gated():
    grounding = _grounding(
        ("user", "I deploy my blog with Hugo to Netlify, and I have a dog."),
        ("assistant", "Your dog Rex must love walks. You prefer tabs, I assume."),
    )
    assert check("User's blog is built with Hugo and deployed to Netlify", grounding=grounding).ok
    invented_name = check("User's dog is named Rex", grounding=grounding)
    assert invented_name.reason == "ungrounded" and "Rex" in invented_name.detail
    assert check("User prefers tabs over spaces", grounding=grounding).reason == "ungrounded"


def test_grounding_uses_the_embedding_when_words_differ():
    from memctl.embeddings import FakeEmbedder

    grounding = _grounding(
        ("user", "the frontend is vue with pinia stores"), min_overlap=0.9, similarity=0.6, embed=FakeEmbedder().embed
    )
    assert check("the frontend uses vue with pinia stores", grounding=grounding).ok


def test_grounding_across_languages_checks_names_and_numbers_only():
    grounding = _grounding(("user", "以后回答我都用中文吧。我们的服务都部署在阿里云 ACK 上。"))
    assert check("User prefers replies in Chinese", grounding=grounding).ok
    assert check("User's team deploys on GKE in region EU9", grounding=grounding).reason == "ungrounded"
    assert check("User's team deploys on ACK (Kubernetes)", grounding=grounding).ok


RECALL_BLOCK = (
    "## What you remember about this\n\n- User prefers dark mode in every editor\n"
    "- The deploy target is Kubernetes\n\n## Approaches that worked before\n\n"
    "- Editor shows light mode after update -> set theme dark in settings.json\n"
)


def test_recalled_block_is_split_out_and_echoes_are_gated():
    rest, quoted = split_recalled("Context for you:\n" + RECALL_BLOCK + "\nNow answer.")
    assert quoted[:2] == ["User prefers dark mode in every editor", "The deploy target is Kubernetes"]
    assert "dark mode" not in rest and "Now answer." in rest
    grounding = _grounding(("system", RECALL_BLOCK), ("user", "what theme do I like? also my cat is called Miso"))
    echo = check("User prefers dark mode in every editor", grounding=grounding)
    assert echo.reason == "echo"
    # recalled text is not evidence: restating it with other words is not grounded either
    assert check("User likes dark mode in all editors", grounding=grounding).reason in ("echo", "ungrounded")
    assert check("User's cat is called Miso", grounding=grounding).ok


def test_recalled_file_formats():
    assert parse_recalled(RECALL_BLOCK)[0] == "User prefers dark mode in every editor"
    doc = {"memories": [{"text": "a fact here"}], "solutions": [{"text": "x -> y"}]}
    assert parse_recalled(json.dumps(doc)) == ["a fact here", "x -> y"]
    assert parse_recalled("one memory\n- another memory\n") == ["one memory", "another memory"]


@pytest.mark.skipif(not (REPO.parent / "shared/eval/transcripts").is_dir(), reason="eval transcripts not present")
def test_eval_transcripts_meet_the_targets():
    """bench/quality_gate.py with grounding (fake embedder fallback): >= 95 % facts kept, >= 90 % noise dropped."""
    proc = subprocess.run(
        [sys.executable, "bench/quality_gate.py", "--embedder", "fake", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["facts"] >= 30 and figures["noise"] >= 40
    assert figures["facts_kept_pct"] >= 95.0 and figures["noise_dropped_pct"] >= 90.0


# --- the tune-half rules: for each, what must drop and a durable lookalike that must stay, EN and ZH ------

RULE_CASES = [
    # rule, [(must drop, English), (must drop, Chinese)], [(durable lookalikes that must be kept)]
    (  # readings of one moment (fourth tune batch): instruments, status tallies, countdowns, forecasts
        "passing_state",
        [
            "Live sensor data: intake 41 C, boost 1.2 bar",
            "Glucose was 6.4 mmol/L at 07:15",
            "Dehumidifier at stage 2/5 drying",
            "Jira board: 41 open, 12 pending, 2 breached",
            "Hemocytometer: 2.3e5 cells/mL",
            "Print queue took 40 jobs in the last 3 hours",
            "The last run was 8.2 km along the canal",
            "用户这回体重 71.5 公斤",
            "离搬家还有 12 天",
            "天气预报：周末有雨，降水概率 60%",
        ],
        [
            "Target blood pressure is below 130/80",
            "Tyre pressures: 2.4 bar front, 2.6 bar rear",
            "User takes blood pressure readings twice a day at 7:00 and 19:00",
            "The last service was in March 2026 at 45,000 miles",
            "The weekly report lists unsolved, pending and breached tickets",
            "BP readings above 140/90 mean a call to the GP",
            "用户每天早上 7 点测血糖",
        ],
    ),
    (
        "passing_state",
        ["The client loved the album, which made the user's day", "Chen 女士回复说收到了，很满意，谢谢"],
        ["User loves editing in black and white", "客户说以后都要 RAW 原片"],
    ),
    (
        "raw_error",
        [
            "kernel: usb 1-1: device descriptor read error -71",
            "Mail bounced: 554 5.7.1 relay access denied",
            "Backup failed for 12 files on the NAS share",
        ],
        ["Error code -110 on the SD reader means the card needs reformatting in camera"],
    ),
    (
        "run_detail",
        ["Scan saved as plate_0412_017.tif", "Exported 20261203_run07.csv to the share"],
        ["Plate scans are saved as TIFF in the lab share"],
    ),
    (
        "one_off_request",
        ["张先生麻烦用户帮忙改一下合同", "The bride asked the user to resend the gallery link"],
        ["客户总是要求用户交付 RAW 原片"],
    ),
    (
        "maybe_intention",
        ["The clinic may add evening slots next year"],
        ["The clinic adds evening slots every winter"],
    ),
    (
        "one_off_event",
        ["林小姐约周三下午 3 点在工作室试妆"],
        ["林小姐每周三下午在工作室", "Support hours are 08:00–20:00 Monday to Friday, plus Saturday 10:00–14:00"],
    ),
    (
        "relative_time",
        ["User has to call the landlord tomorrow", "用户明天要去医院复查"],
        [
            "User's weekly review is on Fridays at 16:00",
            "用户每周五下午四点做周报",
            "The thesis draft goes to the supervisor on 2027-02-01",
        ],
    ),
    (
        "one_off_event",
        ["User's dinner with Sam is on Friday at 19:30", "用户下个周五去面试"],
        [
            "User's pottery class is on Thursday evenings",
            "用户周二和周四晚上上瑜伽课",
            "Backups run nightly at 02:00",
            "User's standup is at 9:30",
        ],
    ),
    (
        "deadline",
        ["The tax form is due by Friday", "用户的报销单需要在周五之前提交"],
        ["Client invoices are due 30 days net", "增值税申报每季度截止日期是次月15日"],
    ),
    (
        "maybe_intention",
        ["User might try Rust for the next side project", "用户说也许以后会学日语"],
        ["User will defend the thesis on 12 June 2027", "用户计划在2027年6月答辩"],
    ),
    (
        "one_off_request",
        ["User asked the assistant to convert the PDF to Word", "请帮我把这封邮件翻译成英文"],
        ["User wants every reply in British English", "以后请始终用中文回答我"],
    ),
    (
        "run_detail",
        [
            "Worker crashed with pid 48213 on host web-07",
            "Parser stopped at byte offset 1048576",
            "orders.csv has 12,408 rows",
            "The nightly CI run 9876543 timed out on macOS",
            "进程号 48213 的 worker 退出",
        ],
        [
            "User's CI runs on GitHub Actions with a macOS and a Linux runner",
            "用户的构建在 GitHub Actions 上运行",
            "The warehouse keeps seven years of order history",
        ],
    ),
    (
        "ephemeral_id",
        ["Proxmox task 0001A2B3 failed on the node", "工单号：TK20931 已转给二线"],
        ["Invoices must show the VAT ID DE298761034", "Dates in reports follow ISO-8601"],
    ),
    (
        "raw_error",
        ["ECONNREFUSED when calling the billing API", "报错：连接被拒绝"],
        ["User's team treats every compiler warning as an error", "用户要求所有错误信息都用英文"],
    ),
    (
        "passing_state",
        ["The NAS volume is 91% used", "用户生病了，在家休息"],
        ["User is allergic to cats", "用户对猫过敏", "User keeps the server room at 18 °C"],
    ),
    (
        "figures",
        ["October P&L: income £8,400, expenses £2,150, net £6,250"],
        ["Pension contributions are 5% employee and 3% employer", "quillmark supports Python 3.10 through 3.14"],
    ),
    (
        "past_event",
        ["Container web-1 was restarted twice", "用户的东京出差取消了"],
        ["User has lived in Lisbon since 2020", "用户已经搬到里斯本了"],
    ),
    (
        "expiring_offer",
        ["The 20% coupon expires at midnight", "这家店的咖啡豆在打折"],
        ["User's passport expires on 2028-08-31", "用户的护照有效期到2030年"],
    ),
    (
        "agent_action",
        ["The assistant deleted the old backups", "助手已经帮用户删除了旧的备份"],
        ["User deletes old backups every week", "用户每周删除一次旧备份"],
    ),
    (
        "greeting",
        ["User said hello and thanked the assistant", "用户向助手表示感谢"],
        ["User greets customers in Portuguese and English", "用户用葡萄牙语和英语接待客户"],
    ),
    (
        "to_do",
        ["User needs to email the landlord about the deposit", "用户记得要给房东回电话"],
        ["User has to take insulin before every meal", "用户每个月要给父母打钱"],
    ),
    (
        "session_topic",
        ["The conversation was about Kubernetes ingress", "这次对话是关于简历修改的"],
        ["User's questions are usually about Kubernetes", "用户经常问关于 Kubernetes 的问题"],
    ),
    (
        "tool_status",
        ["npm run build [exit code 1]", "Container web-1 restarted"],
        ["User restarts the containers every night", "用户每晚重启一次容器"],
    ),
    (
        "command_output",
        ["12 个测试通过，2 个失败", "LaTeX 编译耗时 89214ms", "All 42 tests passed in 3.1s"],
        ["用户的测试都用 pytest 写", "The CI runs the full test suite on every push"],
    ),
    (
        "figures",
        ["发票金额：¥1,280.00，税额 ¥166.40，合计 ¥1,446.40"],
        ["User's hourly rate is £65", "用户的时薪是 300 元"],
    ),
    ("calculation", ["350 °F is about 177 °C"], ["用户喜欢烤箱温度设在 180 °C", "User bakes bread at 230 °C"]),
    ("date_only", ["Today is Friday, 14 June", "今天是星期五"], ["User's birthday is 3 March", "用户的生日是3月3日"]),
    (
        "bare_topic",
        ["Quarterly revenue figures table"],
        [
            "Home lab services: Nextcloud, Jellyfin, Pi-hole and Home Assistant",
            "家里跑的服务：Nextcloud、Jellyfin、Pi-hole",
            "第三章的数据集：CIFAR-10、FEMNIST",
        ],
    ),
    # widened from the second tune batch: readings of one moment, inventories, progress, emotional asides,
    # popularity counts, memory addresses, activity ids, failures with a code or retries, error constants
    (
        "passing_state",
        [
            "User is kind of nervous about the exam",
            "目前 CPU 温度是 78°C",
            "冰箱里还剩牛奶 2 瓶",
            "安装包还在下载",
            "The repo has 1,200 stars",
            "用户被这个报错搞得快崩溃了",
        ],
        [
            "User gets nervous about flying and prefers trains",
            "用户坐飞机会很紧张",
            "The public API is frozen until 3.0; new features go in an experimental module",
            "The app reached 100,000 downloads in 2025",
        ],
    ),
    (
        "run_detail",
        ["Crash at 0x7FF6A13B2C10 in the renderer", "Strava activity 18822734112 synced"],
        ["User's long runs start from the lake path"],
    ),
    (
        "command_output",
        ["Upload failed with 413 after the second try", "Flow was 0.4 l/min (expected 1.8)"],
        ["User writes mods in C# with Rider"],
    ),
    ("raw_error", ["Sign-in failed with reason ACCOUNT_LOCKED"], ["User's account name is FrostQuill"]),
    (
        "agent_action",
        ["Assistant re-sent the invoice to the client", "助手已经设好了闹钟"],
        ["User re-reads every contract before signing"],
    ),
    ("greeting", ["User says thank you for the help"], ["User says thanks in Japanese to the neighbours"]),
    ("maybe_intention", ["User may hire a tutor for the kids"], ["User may not eat pork"]),
    ("one_off_request", ["用户问这道菜要放多少盐"], ["用户的问题一般都是关于税务的"]),
    ("deadline", ["用户周末之前要把报告发出去"], ["用户每个月底前交房租"]),
    (
        "past_event",
        ["The upload was rejected twice"],
        [
            "User took over the weekly payroll; Ana no longer does it",
            "The library was relicensed from MIT to Apache-2.0 in version 3.0",
            "User lifts on Monday, Wednesday, Friday at 6:15 am",
        ],
    ),
    # widened from the third tune batch: feelings of the moment, readings, balances, parcels, HTTP failures,
    # camera paths, batch numbers; and the durable lookalikes it showed (decisions, price lists, model numbers,
    # minimum orders, conditions, dated dues, habitual feelings)
    (
        "passing_state",
        [
            "User is fed up with the dust everywhere",
            "User hopes the gig sells out",
            "WaniKani has 187 reviews available now",
            "Bandcamp shows 37 page views",
            "Leo 的午餐账户余额 $12.60",
            "用户觉得早上送两个孩子很累",
            "物流中通 75312004418823 运输中",
        ],
        ["The tidyparse 3.0 milestone is due on 30 June 2026", "用户坐飞机会很紧张"],
    ),
    (
        "raw_error",
        ["Google Calendar could not fetch the URL: HTTP 404 (Not Found)"],
        ["User's site returns 404 pages in Welsh"],
    ),
    (
        "local_coordinate",
        ["耳道镜照片保存在 /sdcard/DCIM/Otoscope/IMG_0412.jpg"],
        ["User keeps photos in Google Photos"],
    ),
    (
        "ephemeral_id",
        ["Dow Corning 785 batch 4412-X09, expiry 2026-11"],
        [
            "User's gear: a Fender Jazz Bass into an Ampeg Rocket Bass RB-110 combo",
            "Wholesale terms: minimum order 24 candles, 40% off retail, net 30 payment",
        ],
    ),
    ("agent_action", ["助手写好了请假邮件的草稿"], ["用户每周日写好下周的菜单"]),
    ("maybe_intention", ["Leo 可能下学期想踢足球", "用户可能考虑给咪咪买个饮水机"], ["用户对猫毛过敏"]),
    ("relative_time", ["The floor fitter can't start till the week after next"], ["Bin day is every other Tuesday"]),
    ("figures", [], ["Prices: 8 oz candles $24, 12 oz $32; free shipping on orders over $60"]),
    # fifth tune batch (eleventh session): model numbers are not ids, a day of the month is a schedule
    (
        "ephemeral_id",
        ["Parts order PO-4417 was dispatched", "Support incident INC-3308 is still open", "Rental booking #RB-7720"],
        [
            "User's shack: Kenwood TS-590SG, a Diamond X-50 vertical and an MFJ-993B tuner",
            "User runs the TS-590 at 100 W on 40 m",
            "The greenhouse heater is a Bio Green PAL-2000",
        ],
    ),
    ("deadline", ["The grant report is due on Friday"], ["Council tax is due on the 15th; the direct debit covers it"]),
    (
        "raw_error",
        [
            "Calibre error: 'NoneType' object has no attribute 'text'",
            "Gradle error 137: container ran out of memory",
            "The label printer failed with 'paper jam (code 0x2E)'",
            "导入接口返回 409，提示列表已存在",
            "报销表格 F12 单元格显示 #REF!",
            "systemctl: Active: failed, Result: exit-code",
        ],
        ["User's label printer is a Brother QL-820NWB on the office network"],
    ),
    (
        "run_detail",
        [
            "The weather station sync finished: 2,310 readings uploaded",
            "The manuscript imported as 4,210 segments",
            "The inventory sheet has 318 rows",
            "Backup complete: 4 volumes, 92 GB",
            "拼写检查报了 12 个问题",
        ],
        ["User keeps the inventory sheet in Google Drive, one row per item"],
    ),
    (
        "passing_state",
        [
            "User is relieved the audit is finished",
            "API usage this billing period is 8,420 of 10,000 calls",
            "The thermostat display read 16.5 C",
            "用户说搬完家好累",
            "看了一下午表格，用户眼睛都花了",
            "义卖目前报了 18 个摊位",
        ],
        ["User's API plan allows 10,000 calls a month", "用户每周三晚上去游泳"],
    ),
    ("one_off_request", ["用户麻烦助手把会议纪要整理成要点"], ["用户习惯会后当天整理会议纪要"]),
    ("maybe_intention", ["用户考虑下个季度要不要换供应商"], ["用户的供应商是华东包装，每月结算一次"]),
    ("agent_action", ["助手已经重新导入了会员名单"], ["会员名单每季度导入一次"]),
    (
        "past_event",
        [],
        [
            "User chose Karndean LVT in 'Ashland oak' for the kitchen and hallway",
            "Returns: 30 days for unopened candles; buyer pays return shipping unless the jar arrived broken",
        ],
    ),
]


@pytest.mark.parametrize("rule, drops, keeps", RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_each_rule_drops_its_class_and_keeps_the_lookalike(rule, drops, keeps):
    for text in drops:
        verdict = check(text)
        assert verdict.reason == rule, (text, verdict.reason, verdict.detail)
    for text in keeps:
        verdict = check(text)
        assert verdict.ok, (text, verdict.reason, verdict.detail)


DURABLE_CLASSES = [  # issue #20, failure classes 1 and 2: dropped by the gate before, facts all
    "User's fiscal year runs from 1 April to 31 March",
    "公司的财年从4月1日到次年3月31日",
    "The novel's first draft is planned to be finished by 2027-09-30",
    "User runs a weather station on the roof",
    "Homelab stack: Proxmox, TrueNAS, Nextcloud and Jellyfin",
    "User's team syncs Mondays at 10:00 CET",
    "用户是素食者",
]


@pytest.mark.parametrize("text", DURABLE_CLASSES)
def test_durable_facts_that_look_transient_are_kept(text):
    verdict = check(text)
    assert verdict.ok, (verdict.reason, verdict.detail)


SOLUTIONS = [  # (text, reason or None): the solutions path drops output with no fix, never a fix with a command
    ("docker compose -f compose.yml up -d [exit code 1]", "tool_status"),
    ("$ docker compose up -d\nContainer db-1 Started", "tool_status"),
    ("pytest: 3 failed, 41 passed in 2.31s, see the log", "command_output"),
    ("ECONNREFUSED 10.1.2.3:5432 while running the database migrations on CI", "raw_error"),
    (
        "docker compose up fails with 'port is already allocated' -> stop the old container with docker compose "
        "down, then run docker compose up -d again",
        None,
    ),
    ("docker compose up 报 port is already allocated -> 先执行 docker compose down 再重新启动", None),
    (
        "pytest reports 3 failed tests only on CI -> set TZ=UTC in the workflow because the tests compare local dates",
        None,
    ),
    ("Migrations fail with ECONNREFUSED on CI -> start the postgres service container before the job steps", None),
]


@pytest.mark.parametrize("text, reason", SOLUTIONS)
def test_solutions_path_drops_output_and_keeps_fixes_with_commands(text, reason):
    assert check(text, "solutions").reason == reason


def test_enabled_rules_are_the_measured_ones():
    """Every rule that may drop was measured >= 0.97 precise on the tune half, or never fired there."""
    from memctl.quality import enabled_rules, gate_data

    data = gate_data()
    assert data["min_precision"] >= 0.97 and data["corpus"]["facts"] >= 50
    for area in ("fragments", "solutions"):
        names = {r.name for r in enabled_rules(area)}
        assert names and names == set(data["enabled"][area])
        for name in names:
            measured = data["rules"][area][name]
            assert measured["drops"] == 0 or measured["precision"] >= 0.97, (area, name, measured)
    # a rule measured as imprecise is not used: raw_error on fragments would have to drop facts otherwise
    assert all(
        m["precision"] is None or m["precision"] >= 0.97 or name not in data["enabled"][area]
        for area in data["rules"]
        for name, m in data["rules"][area].items()
    )


def test_without_the_measurement_the_gate_keeps(monkeypatch):
    import memctl.quality as quality

    monkeypatch.setattr(quality, "gate_data", lambda: {})
    assert check("All 42 tests passed in 3.1s").ok
    assert quality.rule_reason("All 42 tests passed in 3.1s") is None


def test_rules_do_not_drop_chinese_for_lacking_english_words():
    """A Chinese statement has no English verb and one whitespace word: neither may decide its fate."""
    for text in ("用户住在杭州", "团队所有服务都部署在阿里云 ACK 上", "论文用 LaTeX 写，参考文献用 BibTeX 管理"):
        assert check(text).ok, text


def test_grounding_matches_chinese_by_characters():
    grounding = _grounding(("user", "我的论文是用 LaTeX 写的，参考文献放在 Zotero 里。"))
    assert check("用户的论文用 LaTeX 写", grounding=grounding).ok
    assert check("用户的参考文献用 Zotero 管理", grounding=grounding).ok
    invented = check("用户养了一只叫咪咪的猫", grounding=grounding)
    assert invented.reason == "ungrounded", invented
    # an English summary of a Chinese conversation: only numbers and ALLCAPS names can be compared
    assert check("User writes the thesis in LaTeX", grounding=grounding).ok
    assert check("User's thesis is written in Word 2019", grounding=grounding).reason == "ungrounded"


def test_content_stems_split_chinese_into_bigrams():
    from memctl.quality import content_stems

    units = content_stems("用户喜欢深色主题 in every editor")
    assert "深色" in units and "主题" in units and "editor" in units
    assert "用户" not in units  # the frame ("user") carries no content


def test_classifier_weights_match_its_features():
    from memctl.gate_classifier import GateClassifier, feature_names

    if not GateClassifier.available():
        pytest.skip("no classifier shipped")
    model = GateClassifier.load()
    assert len(model.weights) == 384 + len(feature_names())
    assert 0.0 < model.threshold <= 1.0


@pytest.mark.skipif(not (REPO / "eval/corpus/tune").is_dir(), reason="tune half not present")
def test_tune_half_meets_the_targets():
    proc = subprocess.run(
        [
            sys.executable,
            "bench/quality_gate.py",
            "--corpus",
            "eval/corpus/tune",
            "--embedder",
            "fake",
            "--no-foreign",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["facts"] >= 80 and figures["noise"] >= 60
    assert figures["facts_kept_pct"] >= 95.0 and figures["noise_dropped_pct"] >= 90.0
    assert figures["solutions_kept_pct"] >= 95.0
    assert figures["gates"]["main_before"]["facts_kept_pct"] < figures["facts_kept_pct"]


def test_hand_written_examples_outside_the_tune_domains():
    """Our own examples from domains the tune half does not have: no durable fact dropped, most noise out."""
    examples = json.loads((REPO / "tests/data/gate_examples.json").read_text(encoding="utf-8"))
    dropped_facts = [(t, check(t).reason) for t in examples["facts"] if not check(t).ok]
    assert not dropped_facts
    kept_noise = [t for t in examples["noise"] if check(t).ok]
    assert len(kept_noise) <= 0.1 * len(examples["noise"]), kept_noise


def test_learned_gate_only_with_the_model_it_was_trained_on():
    from memctl.embeddings import DEFAULT_LOCAL_MODEL, ModelInfo
    from memctl.gate_classifier import GateClassifier
    from memctl.quality import learned_gate_embed

    if not GateClassifier.available():
        pytest.skip("no classifier shipped")

    def embed(texts):
        raise AssertionError("not called")

    assert learned_gate_embed(ModelInfo("local", DEFAULT_LOCAL_MODEL), embed) is embed
    assert learned_gate_embed(ModelInfo("fake", "fake"), embed) is None
    assert learned_gate_embed(ModelInfo("local", "/models/other-model"), embed) is None


def test_learned_gate_decides_fragments_and_names_the_agreeing_rule(monkeypatch):
    from memctl import gate_classifier

    class Stub:
        def reason(self, text, area, embed):
            return ("classifier", "p(noise) 0.99") if "noise" in text else None

    monkeypatch.setattr(gate_classifier.GateClassifier, "load", classmethod(lambda cls: Stub()))
    embed = object()
    # the classifier keeps what a rule alone would drop, and drops what no rule names
    assert check("User has to call the landlord tomorrow", embed=embed).ok
    learned = check("User mentioned some noise about printers", embed=embed)
    assert learned.reason == "classifier" and "0.99" in learned.detail
    agreed = check("User has noise to deal with tomorrow", embed=embed)
    assert agreed.reason == "relative_time" and "0.99" in agreed.detail
    # solutions always go through the rules
    assert check("docker compose -f compose.yml up -d [exit code 1]", "solutions", embed=embed).reason == "tool_status"


def test_memorize_gate_setting_is_checked():
    from types import SimpleNamespace

    from memctl.embeddings import ModelInfo
    from memctl.errors import UsageError
    from memctl.memorize import _gate_embed

    def store(choice, provider="fake"):
        return SimpleNamespace(
            config={"memorize_gate": choice},
            embed=lambda texts: None,
            embedder=SimpleNamespace(info=ModelInfo(provider, "fake")),
        )

    notes: list[str] = []
    assert _gate_embed(store("rules"), notes) is None and not notes
    assert _gate_embed(store("classifier"), notes) is None and "MiniLM" in notes[0]
    assert _gate_embed(store("both"), notes) is None and "MiniLM" in notes[1]
    with pytest.raises(UsageError, match="memorize_gate"):
        _gate_embed(store("bayes"), notes)
