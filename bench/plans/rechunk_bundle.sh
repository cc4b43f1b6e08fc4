#!/bin/bash
# Re-split the offline bundle's chunks (.gpu/cNN, written by ../shared/gpu/bundle.sh) so that one
# device call carries the tracked tree and one chunk within its limit. The tree grows with every
# session's results (41.6 MB in session 49, when 26-MiB chunks were refused), and each chunk
# is one install call, so the chunks are made as large as still fit.
#   bash bench/plans/rechunk_bundle.sh [LIMIT_BYTES, default 64000000]
# Then install as before: one call per chunk, carrying .gpu/cNN, install.sh, env.sh, chunks.sha256.
#   LEAN=1 bash bench/plans/rechunk_bundle.sh
# sizes the chunks for a tree without bench/results (~7.6 MB of 53 MB in session 54: 6 calls of
# 52 MiB instead of ~20, ~2 minutes of a lease saved), for a lease where minutes count. Then
# rm -rf bench/results before the install calls (nothing on the GPU reads it) and
# git checkout -- bench/results after the last one; later calls carry only the three small files.
set -euo pipefail
cd "$(dirname "$0")/../.."
LIMIT=${1:-64000000}
ls .gpu/c[0-9][0-9] > /dev/null 2>&1 || { echo "no .gpu/cNN here: run bash ../shared/gpu/bundle.sh first"; exit 1; }
spec=(-- .)
if [ "${LEAN:-0}" = 1 ]; then
    [ -z "$(git status --porcelain -- bench/results)" ] || { echo "bench/results has changes git does not hold: commit them before a lean install"; exit 1; }
    spec+=(':!bench/results')
fi
tree=$( { git ls-files -z "${spec[@]}"; git ls-files -z --others --exclude-standard "${spec[@]}"; } | du -cb --files0-from=- | tail -1 | cut -f1)
small=$(du -cb .gpu/install.sh .gpu/env.sh .gpu/chunks.sha256 | tail -1 | cut -f1)
mib=$(( (LIMIT - tree - small - 1000000) / 1048576 ))  # 1 MB to spare
[ "$mib" -ge 4 ] || { echo "the tree ($tree bytes) leaves no room for a chunk under $LIMIT: prune bench/results"; exit 1; }
tmp=$(mktemp -d)
cat .gpu/c[0-9][0-9] > "$tmp/all.bin"
sum=$(sha256sum "$tmp/all.bin" | cut -d' ' -f1)
rm .gpu/c[0-9][0-9]
(cd .gpu && split -b "${mib}M" -d -a 2 "$tmp/all.bin" c && sha256sum c[0-9][0-9] | awk '{print $1"  "$2}' > chunks.sha256)
[ "$(cat .gpu/c[0-9][0-9] | sha256sum | cut -d' ' -f1)" = "$sum" ] || { echo "re-split bundle differs"; exit 1; }
rm -r "$tmp"
echo "tree $tree bytes: $(ls .gpu/c[0-9][0-9] | wc -l) chunks of ${mib} MiB (c00 ... $(ls .gpu/c[0-9][0-9] | tail -1 | xargs basename))"
if [ "${LEAN:-0}" = 1 ]; then echo "lean: rm -rf bench/results before the install calls, git checkout -- bench/results after them"; fi
