#!/bin/sh
# memctl-nightly: back up, prune, purge and export one store; safe to run more than once a day.
# Each run writes a new folder $NIGHTLY_BACKUPS/<date>-<random>/ (the agent's backup and one JSONL per
# store), so a second run never meets the first run's backup; it stops at the first failing step
# (set -e: the exit code is that step's, and what ran before it is kept).
#
#   NIGHTLY_SUBDIR   the store to back up and prune (default agent1)
#   NIGHTLY_BACKUPS  where the run folders go (default $HOME/backups/memctl)
set -eu
subdir=${NIGHTLY_SUBDIR:-agent1}
backups=${NIGHTLY_BACKUPS:-$HOME/backups/memctl}
mkdir -p "$backups"
run=$(mktemp -d "$backups/$(date +%F)-XXXXXX")   # new and empty: `memctl backup` refuses a used folder
memctl -s "$subdir" backup "$run/$subdir" -q || { rc=$?; rmdir "$run" 2>/dev/null || :; exit "$rc"; }
memctl -s "$subdir" prune --not-accessed-for 90d --source conversation --min-importance 0.3 --yes -q
# let what nobody uses fade: importance halves every importance_half_life (90) days without a recall or load,
# so a 0.5 fact unused for ~4 months (0.5 -> 0.2) goes, a 0.9 rule unused for ~7 months
memctl -s "$subdir" prune --decayed-below 0.2 --source conversation --yes -q
memctl -s "$subdir" purge --older-than 180d --yes -q
memctl export --all-subdirs --vectors -o "$run/jsonl" -q   # one JSONL per store
echo "memctl-nightly: $run"
