"""Embedders: fake determinism, the shared content-hash cache, and the litellm HTTP path."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

import memctl
from memctl.embeddings import CachedEmbedder, FakeEmbedder, LiteLLMEmbedder
from memctl.errors import EmbeddingError


def test_fake_is_deterministic_and_normalised():
    a, b = FakeEmbedder().embed(["hello world", "other text"]), FakeEmbedder().embed(["hello world", "other text"])
    assert np.array_equal(a, b) and np.allclose(np.linalg.norm(a, axis=1), 1.0)
    assert a.dtype == np.float32 and a.shape == (2, 384)


def test_cache_skips_known_texts_and_is_shared_across_subdirs(home: Path):
    inner = FakeEmbedder()
    cache_dir = home / ".cache" / "embeddings"
    first = CachedEmbedder(inner, cache_dir).embed(["one", "two", "one"])
    assert inner.calls == [["one", "two"]]
    second = CachedEmbedder(inner, cache_dir).embed(["two", "three", "one"])
    assert inner.calls[-1] == ["three"]
    assert np.array_equal(first[1], second[0]) and np.array_equal(first[0], second[2])
    with memctl.open_store(home, "a", embedder=CachedEmbedder(inner, cache_dir)) as store:
        store.add(["one", "four"])
    assert inner.calls[-1] == ["four"]


class _EmbeddingServer(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = FakeEmbedder(8).embed([str(i) for i in inputs]).tolist()
        payload = {
            "object": "list",
            "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def embedding_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingServer)
    _EmbeddingServer.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_litellm_embedder_over_http(embedding_server, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-test-123")
    embedder = LiteLLMEmbedder(
        "openai/test-embed", api_base=embedding_server, api_key_env="TEST_EMBED_KEY", batch_size=2
    )
    vectors = embedder.embed(["a", "b", "c"])
    assert vectors.shape == (3, 8)
    assert np.allclose(vectors, FakeEmbedder(8).embed(["a", "b", "c"]), atol=1e-6)
    assert len(_EmbeddingServer.requests) == 2  # batches of 2
    assert _EmbeddingServer.requests[0]["auth"] == "Bearer sk-test-123"


def test_litellm_missing_key_env_is_a_clear_error():
    embedder = LiteLLMEmbedder("openai/test-embed", api_base="http://127.0.0.1:9/v1", api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(EmbeddingError, match="NO_SUCH_KEY_VAR"):
        embedder.embed(["a"])


def test_cli_with_litellm_provider(cli, embedding_server, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMCTL_EMBEDDING_PROVIDER", "litellm")
    monkeypatch.setenv("MEMCTL_EMBEDDING_MODEL", "openai/test-embed")
    monkeypatch.setenv("MEMCTL_EMBEDDING_API_BASE", embedding_server)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused")
    assert cli("save", "remote embedded memory").code == 0
    doc = cli("load", "remote embedded memory", "--json").json
    assert doc["results"][0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert cli("reindex", "--index-only", "--json").json["model"] == {
        "provider": "litellm",
        "model": "openai/test-embed",
        "dimension": 8,
    }


def test_a_new_onnx_export_removes_older_exports_of_the_same_weights(tmp_path):
    from memctl.embeddings.onnx import _remove_older_exports

    names = [
        "all-MiniLM-L6-v2-abc.onnx",
        "all-MiniLM-L6-v2-abc.json",
        "all-MiniLM-L6-v2-abc-v2.onnx",
        "all-MiniLM-L6-v2-abc-v2.onnx.lock",
        "all-MiniLM-L6-v2-abc-v3.onnx",
        "all-MiniLM-L6-v2-abc-v3.onnx.data",
        "all-MiniLM-L6-v2-abc-v3.json",
        "all-MiniLM-L6-v2-abc-v3.onnx.lock",
        "all-MiniLM-L6-v2-other-v2.onnx",
    ]
    for name in names:
        (tmp_path / name).write_text("x")
    _remove_older_exports(tmp_path / "all-MiniLM-L6-v2-abc-v3.onnx")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name in names) == [
        "all-MiniLM-L6-v2-abc-v3.json",
        "all-MiniLM-L6-v2-abc-v3.onnx",
        "all-MiniLM-L6-v2-abc-v3.onnx.data",
        "all-MiniLM-L6-v2-abc-v3.onnx.lock",
        "all-MiniLM-L6-v2-other-v2.onnx",
    ]


@pytest.mark.parametrize(("model_type", "backend"), [("bert", "onnx"), ("mpnet", "torch"), (None, "torch")])
def test_auto_backend_exports_to_onnx_only_a_bert_folder(tmp_path: Path, model_type, backend):
    # The ONNX export fuses BERT layers and feeds token_type_ids; an MPNet folder failed on its first embed.
    from memctl.embeddings import LocalEmbedder

    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    if model_type:
        (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    assert LocalEmbedder(str(tmp_path))._chosen_backend(tmp_path) == backend
