"""The default model without torch at run time: all-MiniLM-L6-v2 on onnxruntime + tokenizers.

The ONNX file is exported once from the packaged safetensors weights (this one step needs torch)
into the user cache: each BERT layer fused into onnxruntime's Attention/SkipLayerNormalization
kernels, the weights in a side file that onnxruntime memory-maps. It is checked against
sentence-transformers (cosine >= MIN_COSINE on a sample, so vectors stay interchangeable and
stores need no reindex) and reused by every process after. A CLI call then pays ~0.1 s for
onnxruntime, the tokenizer and the session, not ~5 s for torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.errors import EmbeddingError
from memctl.files import cache_root

if TYPE_CHECKING:
    import numpy as np

MIN_COSINE = 0.9999
SMALL_CALL = 2  # texts in a call that count as "a query" for session loading
EXPORT_VERSION = "v4"  # bump when the export recipe changes, so caches are rebuilt
CHECK_TEXTS = [
    "User prefers dark mode in every editor",
    "The deploy target is Kubernetes",
    "hi",
    "数据库使用 PostgreSQL 16，端口 5432",
    "A long paragraph about configuring the build: " + "the cache lives in a shared folder and " * 40,
]


def _weights_digest(model_dir: Path) -> str:
    """Identify the weights cheaply (size + mtime-free head/tail hash) so a new package version re-exports."""
    weights = model_dir / "model.safetensors"
    digest = hashlib.sha256(str(weights.stat().st_size).encode())
    with weights.open("rb") as handle:
        digest.update(handle.read(1 << 20))
        handle.seek(max(0, weights.stat().st_size - (1 << 20)))
        digest.update(handle.read())
    return digest.hexdigest()[:16]


def onnx_path(model_dir: Path) -> Path:
    """The graph; its weights sit next to it in `<name>.onnx.data` (see `weights_path`)."""
    return cache_root() / "onnx" / f"all-MiniLM-L6-v2-{_weights_digest(model_dir)}-{EXPORT_VERSION}.onnx"


def weights_path(graph: Path) -> Path:
    # External weights are memory-mapped by onnxruntime: a session opens in ~15 ms instead of
    # ~140 ms spent parsing and copying 90 MB of initialisers out of one protobuf (measured).
    return graph.with_name(graph.name + ".data")


class OnnxMiniLM:
    """Mean-pooled, normalised BERT embeddings from an ONNX export of a sentence-transformers folder."""

    def __init__(
        self, model_dir: Path, batch_size: int = 64, max_seq_length: int | None = None, spin: bool = True
    ) -> None:
        """`spin`: onnxruntime's intra-op threads busy-wait between kernels (its default). A long-lived
        process that embeds one query at a time on a shared machine wants False: see `_load`."""
        self.model_dir = model_dir
        self.batch_size = batch_size
        self.spin = spin
        self.max_seq_length = max_seq_length or _max_seq_length(model_dir)
        self._session: Any = None
        self._small_session = False
        self._tokenizer: Any = None

    def _load(self, small: bool = False) -> None:
        """`small`: the first call embeds a query or two; skip weight prepacking (-25 ms at load,
        slower big batches), and reload with prepacking if a big batch comes later."""
        if self._session is not None and not (self._small_session and not small):
            return
        self._small_session = small
        path = onnx_path(self.model_dir)
        if not (path.is_file() and weights_path(path).is_file()):
            export_verified(self.model_dir, path)
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.log_severity_level = 3
        # The file was optimised at export; re-optimising would cost time on every call.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        if small:
            options.add_session_config_entry("session.disable_prepacking", "1")
        if not self.spin:
            # Workers that sleep between kernels instead of spinning. Spinning, on this 2-vCPU machine with
            # both cores busy with other jobs, the worker took the CPU from the other processes and from
            # the search that follows the embedding: a warm `memory_search` went from 66 to 42-45 ms p50
            # without it (one thread: 45 ms; quiet machine: 20 ms against 19 spinning and 23 on one
            # thread; bench/README.md, MCP section). Same kernels, same vectors (max |diff| 0).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(self.max_seq_length)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tokenizer

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        self._load(small=len(texts) <= SMALL_CALL)
        out = np.zeros((len(texts), 0), dtype=np.float32)
        # Sorting by length keeps padding (wasted work) small inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows: dict[int, np.ndarray] = {}
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            for i, vector in zip(chosen, self._embed_batch([texts[i] for i in chosen]), strict=True):
                rows[i] = vector
        if texts:
            out = np.stack([rows[i] for i in range(len(texts))])
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        hidden = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def _max_seq_length(model_dir: Path) -> int:
    try:
        return int(json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError):
        return 256


def export_verified(model_dir: Path, path: Path) -> None:
    """Export under a lock (concurrent first runs export once), verify, then publish atomically."""
    import filelock

    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(path) + ".lock", timeout=600):
        if path.is_file() and weights_path(path).is_file():
            return
        sys.stderr.write("memctl: preparing the fast embedding model (one time, ~15 s)...\n")
        with tempfile.TemporaryDirectory(prefix=".export.", dir=path.parent) as work:
            # Built under the final names (the graph records its weights file by name), then
            # published weights first: a graph file present means a complete export.
            raw, optimised, staged = Path(work) / "raw.onnx", Path(work) / "optimised.onnx", Path(work) / path.name
            _export(model_dir, raw)
            _optimise(raw, optimised, model_dir)
            _externalise(optimised, staged)
            cosine = _verify(model_dir, staged)
            if cosine < MIN_COSINE:
                raise EmbeddingError(
                    f"ONNX export disagrees with sentence-transformers (cosine {cosine:.6f})",
                    hint="set embedding_backend: torch",
                )
            os.replace(weights_path(staged), weights_path(path))
            os.replace(staged, path)
        (path.with_suffix(".json")).write_text(json.dumps({"min_cosine": cosine, "texts": len(CHECK_TEXTS)}))
        _remove_older_exports(path)


def _remove_older_exports(current: Path) -> None:
    """Earlier export recipes of the same weights are dead weight (~90 MB each) once this one exists."""
    stem = current.name.rsplit("-", 1)[0]  # all-MiniLM-L6-v2-<digest>
    for old in current.parent.glob(stem + "*"):
        if not old.name.startswith(current.name) and not old.name.startswith(current.stem + "."):
            old.unlink(missing_ok=True)


def _externalise(source: Path, dest: Path) -> None:
    """Move the weights out of the graph into one side file that onnxruntime can memory-map."""
    import onnx

    model = onnx.load(str(source))
    onnx.save_model(
        model,
        str(dest),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=weights_path(dest).name,
        size_threshold=1024,
    )


def _optimise(source: Path, dest: Path, model_dir: Path) -> None:
    """Fuse each BERT layer into a few onnxruntime kernels (Attention, SkipLayerNormalization,
    BiasGelu): ~50 nodes instead of ~400, same float32 maths, faster on CPU. The fusions are
    portable (no hardware-specific kernels); `_verify` checks the result against the reference."""
    from onnxruntime.transformers.optimizer import optimize_model

    config = json.loads((model_dir / "config.json").read_text())
    fused = optimize_model(
        str(source),
        model_type="bert",
        num_heads=int(config["num_attention_heads"]),
        hidden_size=int(config["hidden_size"]),
        opt_level=0,
    )
    fused.save_model_to_file(str(dest))


def _export(model_dir: Path, dest: Path) -> None:
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise EmbeddingError(
            "exporting the ONNX model needs torch and transformers",
            hint="install memctl with its dependencies, or set embedding_backend: torch",
        ) from exc

    class _LastHidden(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    # Eager attention exports the classic pattern onnxruntime's BERT fusion recognises.
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    sample = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.int64)
    mask = (sample != 0).to(torch.int64)
    axes = {0: "batch", 1: "sequence"}
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _LastHidden(model),
            (sample, mask, torch.zeros_like(sample)),
            str(dest),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes, "last_hidden_state": axes},
            opset_version=17,
            dynamo=False,
        )


def _verify(model_dir: Path, candidate: Path) -> float:
    import numpy as np
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(model_dir), device="cpu").encode(CHECK_TEXTS, normalize_embeddings=True)
    probe = OnnxMiniLM(model_dir, batch_size=2)
    import onnxruntime as ort
    from tokenizers import Tokenizer

    probe._session = ort.InferenceSession(str(candidate), providers=["CPUExecutionProvider"])
    probe._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    probe._tokenizer.enable_truncation(probe.max_seq_length)
    probe._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    ours = probe.embed(CHECK_TEXTS)
    return float(np.min(np.sum(reference * ours, axis=1)))
