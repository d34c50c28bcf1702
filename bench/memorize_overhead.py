"""`memctl memorize` time outside the utility model: a batch of transcripts against an instant model.

    python bench/memorize_overhead.py [--corpus DIR] [--count 20] [--runs 3] [--embedder local|fake]
                                      [--profile]

An OpenAI-compatible chat server on 127.0.0.1 answers every utility-model call at once: extraction
returns the transcript's labelled statements (expected fragments and must-not-store items as facts,
expected solutions as solutions, like bench/memory_quality.py), keyword calls a short list, and
consolidation `keep_separate`; the time it spends answering is counted as the model's. Side by side
in one run, on the same `--count` transcripts of `--corpus`, each a new store:

- batch: ONE `memctl memorize T1 ... TN --json` process (start-up paid once), with the default
  `utility_client: auto` (the OpenAI SDK for this local server) and again with `utility_client: litellm`;
- one process per transcript: N `memctl memorize Ti --json` (what a per-conversation hook pays);

and prints, per transcript, wall time minus the model's time (the overhead; goal <= 0.5 s in batch
mode), plus the ratio of the two. `--profile` adds the top functions of an in-process batch run
(cProfile, cumulative time). Speed only: no decision is tuned here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import REPO, python, run_child, table  # noqa: E402

PROMPTS = ("memorize_fragments", "memorize_solutions", "memorize_keywords", "consolidate", "behaviour_merge")


class InstantModel:
    """Replies per prompt, chosen by the system text; the transcript is recognised by its first user line."""

    def __init__(self, cases: list[dict]) -> None:
        from memctl.llm import load_prompt

        self.systems = {load_prompt(p)[0].strip(): p for p in PROMPTS}
        self.cases = cases
        self.busy = 0.0
        self.calls = 0
        self.lock = threading.Lock()

    def reply(self, messages: list[dict[str, str]]) -> str:
        start = time.perf_counter()
        name, message = self._split(messages)
        if name in ("memorize_fragments", "memorize_solutions"):
            case = next((c for c in self.cases if c["_first"] in message), None)
            items = (
                []
                if case is None
                else (
                    [_text(x) for x in case.get("expected_fragments", []) + case.get("must_not_store", [])]
                    if name == "memorize_fragments"
                    else [_text(x) for x in case.get("expected_solutions", [])]
                )
            )
            out = json.dumps(items, ensure_ascii=False)
        elif name == "memorize_keywords":
            out = json.dumps(sorted({w for w in message.split() if len(w) > 6})[:4], ensure_ascii=False)
        else:
            out = json.dumps({"action": "keep_separate", "targets": [], "reason": "bench"})
        with self.lock:
            self.busy += time.perf_counter() - start
            self.calls += 1
        return out

    def _split(self, messages: list[dict[str, str]]) -> tuple[str, str]:
        if messages[0]["role"] == "system":
            return self.systems.get(messages[0]["content"].strip(), "consolidate"), messages[-1]["content"]
        content = messages[0]["content"]
        for system, name in self.systems.items():
            if content.startswith(system):
                return name, content[len(system) :]
        return "consolidate", content


def _text(item: Any) -> str:
    return item if isinstance(item, str) else str(item.get("text") or item.get("new") or item)


def serve(model: InstantModel) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            content = model.reply(body["messages"])
            data = json.dumps(
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def load_cases(corpus: Path, count: int) -> list[tuple[Path, dict]]:
    out = []
    for path in sorted(corpus.glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        users = [m["content"] for m in case.get("messages", []) if m.get("role") == "user"]
        if not users:
            continue
        case["_first"] = users[0][:80]
        out.append((path, case))
    return out[:count]


def timed(model: InstantModel, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, of which the model's) of one child process."""
    before = model.busy
    wall, _ = run_child(args, env=env)
    return wall, model.busy - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "eval" / "corpus" / "tune")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    cases = load_cases(args.corpus, args.count)
    paths = [str(p) for p, _ in cases]
    model = InstantModel([c for _, c in cases])
    server = serve(model)
    env = {
        "MEMCTL_UTILITY_MODEL": "openai/instant",
        "MEMCTL_UTILITY_API_KEY_ENV": "BENCH_KEY",
        "BENCH_KEY": "sk-bench",
        "MEMCTL_UTILITY_API_BASE": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": str(REPO),
    }
    if args.embedder == "fake":
        env["MEMCTL_EMBEDDING_PROVIDER"] = "fake"
    else:
        os.environ.pop("MEMCTL_EMBEDDING_PROVIDER", None)
    cli = [python(), "-m", "memctl"]
    batch, single, through_litellm = [], [], []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as home:
            wall, busy = timed(model, [*cli, "--root", home, "memorize", *paths, "--json"], env)
            batch.append((wall - busy) / len(paths))
        with tempfile.TemporaryDirectory() as home:
            wall, busy = timed(
                model,
                [*cli, "--root", home, "memorize", *paths, "--json"],
                env | {"MEMCTL_INTERNAL_UTILITY_CLIENT": "litellm"},
            )
            through_litellm.append((wall - busy) / len(paths))
        with tempfile.TemporaryDirectory() as home:
            total = busy_total = 0.0
            for path in paths:
                wall, busy = timed(model, [*cli, "--root", home, "memorize", path, "--json"], env)
                total, busy_total = total + wall, busy_total + busy
            single.append((total - busy_total) / len(paths))
        print(
            f"  run {run + 1}: batch {batch[-1]:.3f} s/transcript (litellm {through_litellm[-1]:.3f}), "
            f"one process each {single[-1]:.3f}",
            file=sys.stderr,
        )
    b, s, lite = statistics.median(batch), statistics.median(single), statistics.median(through_litellm)
    print(
        table(
            f"memorize overhead outside the model: {len(paths)} transcripts of {args.corpus.name}, "
            f"embedder {args.embedder}, median of {args.runs} runs, {model.calls} model calls answered",
            ["mode", "s per transcript (wall - model)", "goal", "ratio"],
            [
                ["batch (one process), utility_client auto (OpenAI SDK)", b, "<= 0.5", 1.0],
                ["batch, utility_client litellm", lite, "", lite / b],
                ["one process per transcript, auto", s, "", s / b],
            ],
        )
    )
    print(
        json.dumps(
            {
                "transcripts": len(paths),
                "batch_s_per_transcript": round(b, 4),
                "batch_litellm_s_per_transcript": round(lite, 4),
                "single_s_per_transcript": round(s, 4),
                "ratio": round(s / b, 2),
                "runs": args.runs,
            }
        )
    )
    if args.profile:
        profile(paths, env)
    server.shutdown()
    return 0


def profile(paths: list[str], env: dict[str, str]) -> None:
    import cProfile
    import pstats

    os.environ.update(env)
    import memctl
    from memctl.llm import UtilityModel
    from memctl.memorize.pipeline import memorize_files

    with tempfile.TemporaryDirectory() as home, memctl.open_store(home) as store:
        llm = UtilityModel(store.config)
        prof = cProfile.Profile()
        prof.enable()
        memorize_files(store, [Path(p) for p in paths], llm)
        prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(35)


if __name__ == "__main__":
    raise SystemExit(main())
