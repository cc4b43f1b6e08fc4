"""Sharegpt at TBT 50, the hybrid at 50 req/s: requests sent, admitted by the scheduler (SGLang's
"Prefill batch" log lines, 1-s stamps) and given their first token, cumulative, every 3 s of the
point. The log's clock is aligned to the client's by the shift (whole seconds) that best matches
admissions to first tokens over the first 9 s, while TTFTs were ~50 ms. Run from the repository root:

    git checkout c79397e -- bench/results/x4_s47_2026-11-28   # the per-request records
    python bench/results/x4_s47_2026-11-28/admissions.py
"""
import collections
import datetime
import json
import lzma
import re
from pathlib import Path

D = Path(__file__).parent / "sharegpt50"
meta = json.loads((D / "mux-hybrid__50.meta.json").read_text())
t0 = datetime.datetime.fromisoformat(meta["started"])  # the point's first send, to the second
adm = collections.Counter()
with lzma.open(D / "mux-hybrid.log.xz", "rt") as f:
    for line in f:
        m = re.match(r"\[(\S+ \S+)\] Prefill batch, #new-seq: (\d+)", line)
        if m:
            t = datetime.datetime.fromisoformat(m.group(1))
            if t >= t0:
                adm[int((t - t0).total_seconds())] += int(m.group(2))
with lzma.open(D / "mux-hybrid__50.jsonl.xz", "rt") as f:
    recs = [json.loads(x) for x in f]
sent = collections.Counter(int(r["send"]) for r in recs)
first = collections.Counter(int(r["send"] + r["tok_ms"][0] / 1e3) for r in recs if r.get("ok"))


def cum(c, s, shift=0):
    return sum(v for k, v in c.items() if k - shift <= s)


shift = min(range(-5, 6), key=lambda d: sum(abs(cum(adm, s, d) - cum(first, s)) for s in range(9)))
print(f"log shift: {shift} s\n\n| s | sent | admitted | first token |\n|---:|---:|---:|---:|")
for s in range(max(adm) - shift + 1):
    cs, ca, cf = cum(sent, s), cum(adm, s, shift), cum(first, s)
    if s % 3 == 0:
        print(f"| {s} | {cs} | {ca} | {cf} |")
