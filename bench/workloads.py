"""Workloads for the benchmark: trace replay, Table-1 synthetic sets, multi-turn chat.

Every workload is deterministic given its options (seeded); ``Workload.options`` holds all
of them so a result can say exactly which slice, scale and cap it used.

Trace replay (Mooncake FAST'25, ``../shared/traces/README.md`` beside the checkout)
    Each ``hash_id`` becomes a fixed 512-token block whose token ids come from an RNG seeded
    by (hash_id, salt), drawn from a token range ``vocab`` (default ``[1000, 100000)``: below
    the special-token ranges of Llama-3 (>= 128000) and Qwen3 (>= 151643); ``token_range``
    narrows it for a small model, e.g. ``tiny-llama``'s 4096). A prompt is its blocks concatenated and cut
    to ``input_length`` (the last block is partial), so equal hash-id prefixes are equal token
    prefixes and the radix cache sees the trace's own reuse. Options:
    ``offset``/``n`` (slice), ``rate`` (rescale timestamps so the slice's mean rate
    ``(n-1)/span`` equals it) or ``time_scale`` (multiply timestamps), ``arrival="poisson"``
    (replace timestamps with Poisson arrivals at ``rate``, as the paper's §4.2.3),
    ``input_cap`` (keep the first T tokens: the prompt is truncated from the END, so the
    shared prefix -- and its reuse -- is kept) and ``output_cap``.
    ``salt`` changes every token id (not the structure): the runner salts each rate point
    differently so a point cannot hit cache entries left by the previous one.

Synthetic workloads after the paper's Table 1 (min / mean / max)
    Lengths are lognormal with the stated mean (before clipping) and sigma, clipped to
    Table 1's [min, max]; token ids are uniform in the vocab range; arrivals are Poisson.

    ============  ==========================  ============================  ===============
    workload      input tokens                output tokens                 shared prefix
    ============  ==========================  ============================  ===============
    sharegpt      mean 226, s=1.0, [4,1024]   mean 195, s=1.0, [4,1838]     none
    loogle        mean 30k, s=0.5, [3380,81k] mean 15, s=1.0, [2,326]       none
    openthoughts  mean 709, s=0.6, [311,4633] mean 8374, s=0.8, [684,32k]   243-token system
    code          mean 2000, s=0.7, [100,7500] mean 25, s=1.0, [1,250]       none
                  (10k draws: 1957, -2.1 %)    (10k draws: 24.7, -1.1 %)
    chat-1k       mean 1000, s=1.0, [16,8000]  mean 250, s=0.7, [1,1000]     none
                  (10k draws: 988, -1.2 %)     (10k draws: 248, -0.8 %)
    ============  ==========================  ============================  ===============

    ``code``/``chat-1k``: two production traffics' means and bounds; sigmas chosen so that the
    clipped means (seed 0, above) stay within 2 % of the targets. ``write_trace`` (``python -m
    bench.workloads``) writes these as a JSONL trace for ``python -m sglang_mux.sim --trace``.

    OpenThoughts' input length includes the shared 243-token system prompt (Table 1's
    "reused length"): every request starts with the same 243 token ids.

Mixed short/long workload (the paper's §4.4.3 preemption experiment): ``mixed``
    50% ShareGPT-like and 50% LooGLE-like requests: of ``n`` requests exactly ceil(n/2) are
    the ``sharegpt`` generator's first ceil(n/2) and floor(n/2) the ``loogle`` generator's
    first floor(n/2) (same seed, salt and caps, so their lengths and tokens are those of the
    table above), interleaved in a seeded random order, sent as one Poisson process at
    ``rate`` (all requests together). Each request keeps its class in ``meta["subset"]``
    (``sharegpt``/``loogle``; the client copies it into the record, ``bench.metrics`` breaks
    latencies down by it). Short requests arriving behind a long prefill are what preemption
    is for; the paper compares TTFT per prompt token with preemption on and off.

Multi-turn chat (OpenAI ``/v1/chat/completions``)
    Sessions start as a Poisson process at ``rate`` sessions/s. A session has a shared system
    prompt (same for all sessions, ~150 words), ``turns`` uniform in [turns_min, turns_max]
    (default 2..6); each user message has lognormal words (mean 120, s=0.8, [8,1024]) drawn
    from a list of common English words (about one token per word in Llama-3/Qwen3
    tokenizers); each answer's ``max_tokens`` is lognormal (mean 250, s=0.8, [16,1024]);
    think time before each later turn is exponential (mean ``think_s``, capped at 5x).
    The client sends each turn with all earlier turns AND the server's actual earlier
    answers, so the radix cache carries the conversation; a turn is scheduled when the
    previous answer ended plus the think time (sessions are open-loop, turns closed-loop).
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
import os
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np

from sglang_mux import cli
# The trace draws a simulated point must share with a served one live in the package.
from sglang_mux.traces import BLOCK, poisson_arrivals, sample_sessions, warm_prefixes  # noqa: F401

VOCAB_LO, VOCAB_HI = 1000, 100_000
VOCAB = (VOCAB_LO, VOCAB_HI)
DATA_DIR = Path(__file__).parent / "data"


def shared_traces() -> Path:
    """Where the full traces are read when present: $SGLANG_MUX_TRACES, else shared/traces
    beside the checkout; the project ships slices under bench/data/ for machines with neither."""
    return Path(os.environ.get("SGLANG_MUX_TRACES") or Path(__file__).resolve().parents[2] / "shared" / "traces")


TRACES = {
    "conversation": ("mooncake_conversation.jsonl", "conversation_first1000.jsonl"),
    "mooncake-synthetic": ("mooncake_synthetic.jsonl", "synthetic_first500.jsonl"),
}


@dataclass
class Request:
    """One /generate request: token ids in, ``max_new_tokens`` out, sent at ``t``."""
    rid: str
    t: float                      # scheduled send time, s after the run start
    input_ids: np.ndarray         # int32
    max_new_tokens: int
    meta: dict = field(default_factory=dict)

    @property
    def prompt_len(self) -> int:
        return int(len(self.input_ids))


@dataclass
class ChatTurn:
    user: str
    max_tokens: int
    think_s: float                # pause after the previous answer (0 for the first turn)


@dataclass
class ChatSession:
    sid: str
    t: float                      # scheduled start of the first turn
    system: str
    turns: list[ChatTurn]


@dataclass
class Workload:
    name: str
    kind: str                     # "generate" or "chat"
    requests: list[Request] = field(default_factory=list)
    sessions: list[ChatSession] = field(default_factory=list)
    options: dict = field(default_factory=dict)
    warm: list[Request] = field(default_factory=list)  # sent after the flush, before the point, unmeasured

    @property
    def n_requests(self) -> int:
        return len(self.requests) + sum(len(s.turns) for s in self.sessions)

    @property
    def span_s(self) -> float:
        """Time of the last scheduled send (chat: last session start + its think times)."""
        ts = [r.t for r in self.requests]
        ts += [s.t + sum(x.think_s for x in s.turns) for s in self.sessions]
        return max(ts, default=0.0)


# ---------------------------------------------------------------------------- token helpers

def _salt_int(salt: str) -> int:
    return zlib.crc32(salt.encode())


def token_range(vocab_size: int | None) -> tuple[int, int]:
    """Token ids to draw from for a model with ``vocab_size`` (None: the default range):
    clear of the low ids and of the top of the vocab, where special tokens live."""
    if not vocab_size:
        return VOCAB
    return min(VOCAB_LO, vocab_size // 8), min(VOCAB_HI, vocab_size - 300)


def model_vocab_size(model_dir: str | Path) -> int | None:
    try:
        return int(json.loads((Path(model_dir) / "config.json").read_text())["vocab_size"])
    except (OSError, KeyError, ValueError, TypeError):
        return None


def model_context_len(model_dir: str | Path) -> int | None:
    try:
        return int(json.loads((Path(model_dir) / "config.json").read_text())["max_position_embeddings"])
    except (OSError, KeyError, ValueError, TypeError):
        return None


@functools.lru_cache(maxsize=200_000)
def block_tokens(hash_id: int, salt: str = "", vocab: tuple[int, int] = VOCAB) -> np.ndarray:
    """The fixed 512 token ids of one trace block (same id + salt -> same tokens)."""
    rng = np.random.default_rng([int(hash_id), _salt_int(salt), 0x6D7578])
    out = rng.integers(vocab[0], vocab[1], size=BLOCK, dtype=np.int32)
    out.flags.writeable = False
    return out


def trace_prompt(hash_ids: Sequence[int], input_length: int, salt: str = "",
                 input_cap: int | None = None, vocab: tuple[int, int] = VOCAB) -> np.ndarray:
    """Prompt tokens of one trace row; ``input_cap`` keeps the first T tokens (prefix kept)."""
    n = input_length if input_cap is None else min(input_length, input_cap)
    nblocks = math.ceil(n / BLOCK)
    if not nblocks:
        return np.zeros(0, np.int32)
    return np.concatenate([block_tokens(h, salt, vocab) for h in hash_ids[:nblocks]])[:n]


def random_tokens(rng: np.random.Generator, n: int, vocab: tuple[int, int] = VOCAB) -> np.ndarray:
    return rng.integers(vocab[0], vocab[1], size=int(n), dtype=np.int32)


def block_reuse(prompts: Sequence[Sequence[int] | np.ndarray], block: int = BLOCK) -> float:
    """Fraction of full ``block``-token prompt blocks whose whole prefix was in an earlier
    prompt (an infinite prefix cache at block granularity)."""
    seen: set[bytes] = set()
    reused = total = 0
    for p in prompts:
        a = np.asarray(p, dtype=np.int32)
        h = b""
        for i in range(len(a) // block):   # chained digest: equal digest == equal whole prefix
            h = hashlib.blake2b(h + a[i * block:(i + 1) * block].tobytes(), digest_size=16).digest()
            total += 1
            reused += h in seen
            seen.add(h)
    return reused / total if total else 0.0


def hash_block_reuse(rows: Sequence[dict], full_blocks_only: bool = True) -> float:
    """Same measure from the trace's hash ids (ids are prefix-chained, so 'id seen' == 'prefix
    seen'); ``full_blocks_only=False`` counts the partial last block too (the README's figure)."""
    seen: set[int] = set()
    reused = total = 0
    for r in rows:
        ids = r["hash_ids"]
        nfull = r["input_length"] // BLOCK if full_blocks_only else len(ids)
        for h in ids[:nfull]:
            total += 1
            reused += h in seen
            seen.add(h)
    return reused / total if total else 0.0


# ---------------------------------------------------------------------------- arrivals

def mean_rate(ts: Sequence[float]) -> float:
    """(n-1)/span: the rate the runner targets and reports as offered."""
    ts = np.asarray(ts, dtype=float)
    span = float(ts.max() - ts.min()) if len(ts) else 0.0
    return (len(ts) - 1) / span if span > 0 else float("inf")


def rescale(ts: np.ndarray, rate: float | None = None,
            time_scale: float | None = None) -> np.ndarray:
    ts = np.asarray(ts, dtype=float) - (ts[0] if len(ts) else 0.0)
    if rate is not None and time_scale is not None:
        raise ValueError("give rate or time_scale, not both")
    if rate is not None and len(ts) > 1 and ts[-1] > 0:
        ts = ts * (mean_rate(ts) / rate)
    elif time_scale is not None:
        ts = ts * time_scale
    return ts


# ---------------------------------------------------------------------------- traces

def trace_path(name: str, path: str | Path | None = None) -> Path:
    """The full trace if given/present, else the slice shipped in bench/data/."""
    if path:
        return Path(path)
    full, sliced = TRACES[name]
    shared = shared_traces()
    return shared / full if (shared / full).exists() else DATA_DIR / sliced


def load_trace(name: str = "conversation", path: str | Path | None = None) -> list[dict]:
    with open(trace_path(name, path)) as f:
        return [json.loads(line) for line in f if line.strip()]


def trace_workload(rows: Sequence[dict], *, name: str = "conversation", n: int | None = None,
                   offset: int = 0, rate: float | None = None, time_scale: float | None = None,
                   arrival: str = "trace", input_cap: int | None = None,
                   output_cap: int | None = None, seed: int = 0, salt: str = "",
                   source: str | None = None, vocab: tuple[int, int] = VOCAB,
                   warm_history: bool = False) -> Workload:
    sel = list(rows[offset:offset + n if n is not None else None])
    if not sel:
        raise ValueError(f"empty trace slice (offset={offset}, n={n}, rows={len(rows)})")
    if arrival == "poisson":
        if rate is None:
            raise ValueError("arrival='poisson' needs a rate")
        ts = poisson_arrivals(len(sel), rate, seed)
    elif arrival == "trace":
        ts = rescale(np.array([r["timestamp"] for r in sel], float) / 1000.0, rate, time_scale)
    else:
        raise ValueError(f"unknown arrival {arrival!r}")
    reqs = []
    for i, (r, t) in enumerate(zip(sel, ts)):
        out = max(1, int(r["output_length"]))
        reqs.append(Request(
            rid=f"{name}-{offset + i}", t=float(t),
            input_ids=trace_prompt(r["hash_ids"], int(r["input_length"]), salt, input_cap, vocab),
            max_new_tokens=min(out, output_cap) if output_cap else out,
            meta={"trace_index": offset + i, "trace_input_length": int(r["input_length"])}))
    opts = dict(workload=name, source=source, offset=offset, n=len(sel), requested_n=n, rate=rate,
                time_scale=time_scale, arrival=arrival, input_cap=input_cap,
                output_cap=output_cap, seed=seed, salt=salt, token_range=list(vocab),
                input_cap_note="prompts truncated from the end (shared prefix kept)",
                trace_span_s=float((sel[-1]["timestamp"] - sel[0]["timestamp"]) / 1000.0),
                hash_block_reuse=hash_block_reuse(sel, full_blocks_only=False))
    warm = []
    if warm_history:  # the same blocks (and salt) as the window's prompts: their prefixes hit
        warm = [Request(rid=f"{name}-warm-{i}", t=0.0, input_ids=trace_prompt(p, len(p) * BLOCK, salt, None, vocab),
                        max_new_tokens=1) for i, p in enumerate(warm_prefixes(rows, offset, len(sel), input_cap))]
        opts["warm_history"] = {"prompts": len(warm), "tokens": sum(r.prompt_len for r in warm)}
    return _finish(Workload(name, "generate", requests=reqs, options=opts, warm=warm))


# ---------------------------------------------------------------------------- Table 1 synthetic

# (mean, sigma, min, max) for input and output; shared = shared system-prompt tokens.
SYNTHETIC = {
    "sharegpt": dict(inp=(226, 1.0, 4, 1024), out=(195, 1.0, 4, 1838), shared=0),
    "loogle": dict(inp=(30_000, 0.5, 3380, 81_000), out=(15, 1.0, 2, 326), shared=0),
    "openthoughts": dict(inp=(709, 0.6, 311, 4633), out=(8374, 0.8, 684, 32_000), shared=243),
    # two production traffics (issue 43): the sigmas keep the clipped means within 2 % of these
    "code": dict(inp=(2000, 0.7, 100, 7500), out=(25, 1.0, 1, 250), shared=0),
    "chat-1k": dict(inp=(1000, 1.0, 16, 8000), out=(250, 0.7, 1, 1000), shared=0),
}


def lognormal_lengths(rng: np.random.Generator, n: int, mean: float, sigma: float,
                      lo: int, hi: int) -> np.ndarray:
    mu = math.log(mean) - sigma ** 2 / 2     # so that E[X] = mean before clipping
    return np.clip(np.round(rng.lognormal(mu, sigma, size=n)), lo, hi).astype(int)


def synthetic_workload(name: str, *, n: int, rate: float, seed: int = 0, salt: str = "",
                       input_cap: int | None = None, output_cap: int | None = None,
                       vocab: tuple[int, int] = VOCAB) -> Workload:
    spec = SYNTHETIC[name]
    rng = np.random.default_rng([seed, _salt_int(name), _salt_int(salt)])
    ins = lognormal_lengths(rng, n, *spec["inp"])
    outs = lognormal_lengths(rng, n, *spec["out"])
    ts = poisson_arrivals(n, rate, seed)
    shared = random_tokens(np.random.default_rng([_salt_int("system"), _salt_int(salt)]),
                           spec["shared"], vocab)
    reqs = []
    for i in range(n):
        ids = np.concatenate([shared, random_tokens(rng, max(0, ins[i] - len(shared)), vocab)])
        if input_cap:
            ids = ids[:input_cap]
        out = int(outs[i]) if not output_cap else min(int(outs[i]), output_cap)
        reqs.append(Request(f"{name}-{i}", float(ts[i]), ids, out))
    opts = dict(workload=name, n=n, rate=rate, arrival="poisson", seed=seed, salt=salt,
                input_cap=input_cap, output_cap=output_cap, token_range=list(vocab),
                distributions={k: spec[k] for k in ("inp", "out")}, shared_prefix=spec["shared"],
                distribution_note="lognormal (mean before clipping, sigma, min, max)")
    return _finish(Workload(name, "generate", requests=reqs, options=opts))


MIXED = (("sharegpt", 0.5), ("loogle", 0.5))     # §4.4.3: (generator, share of requests)


def mixed_workload(*, n: int, rate: float, seed: int = 0, salt: str = "",
                   input_cap: int | None = None, output_cap: int | None = None,
                   vocab: tuple[int, int] = VOCAB) -> Workload:
    """Half ShareGPT-like, half LooGLE-like (module docstring), one Poisson process."""
    counts = {"sharegpt": n - n // 2, "loogle": n // 2}
    parts = {name: iter(synthetic_workload(name, n=k, rate=rate, seed=seed, salt=salt,
                                           input_cap=input_cap, output_cap=output_cap,
                                           vocab=vocab).requests)
             for name, k in counts.items()}
    labels = np.array([name for name, k in counts.items() for _ in range(k)])
    np.random.default_rng([seed, _salt_int("mixed"), _salt_int(salt)]).shuffle(labels)
    ts = poisson_arrivals(n, rate, seed)
    reqs = []
    for i, (name, t) in enumerate(zip(labels, ts)):
        r = next(parts[str(name)])
        reqs.append(Request(f"mixed-{i}", float(t), r.input_ids, r.max_new_tokens,
                            meta={"subset": str(name)}))
    opts = dict(workload="mixed", n=n, rate=rate, arrival="poisson", seed=seed, salt=salt,
                input_cap=input_cap, output_cap=output_cap, token_range=list(vocab),
                mix={name: share for name, share in MIXED}, subset_counts=counts,
                distributions={name: {k: SYNTHETIC[name][k] for k in ("inp", "out")}
                               for name, _ in MIXED},
                distribution_note="lognormal (mean before clipping, sigma, min, max)")
    return _finish(Workload("mixed", "generate", requests=reqs, options=opts))


# ---------------------------------------------------------------------------- multi-turn chat

WORDS = ("the of and to in is that it for on with as was he be at by this had not are but from "
         "or have an they which one you were all we her she there would their will when who him "
         "been has more if no out do so can what up said about other into than its time only "
         "could new them man some these then two first may any like now my such make over our "
         "even most after also made many before must through back years where much your way "
         "well down should because each just those people how too little state good very world "
         "still own see men work long get here between both life being under never day same "
         "another know while last might us great old year off come since against go came right "
         "used take three small large house water place light river city music story number "
         "question answer model system paper table figure result method data value level").split()


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=int(n)))


def chat_workload(*, n_sessions: int, rate: float, seed: int = 0, salt: str = "",
                  turns_min: int = 2, turns_max: int = 6, user_words: tuple = (120, 0.8, 8, 1024),
                  answer_tokens: tuple = (250, 0.8, 16, 1024), think_s: float = 3.0,
                  output_cap: int | None = None) -> Workload:
    rng = np.random.default_rng([seed, _salt_int("chat"), _salt_int(salt)])
    system = "You are a helpful assistant. " + _words(
        np.random.default_rng([_salt_int("chat-system"), _salt_int(salt)]), 150)
    starts = poisson_arrivals(n_sessions, rate, seed)
    sessions = []
    for i in range(n_sessions):
        k = int(rng.integers(turns_min, turns_max + 1))
        uw = lognormal_lengths(rng, k, *user_words)
        at = lognormal_lengths(rng, k, *answer_tokens)
        th = np.minimum(rng.exponential(think_s, size=k), 5 * think_s)
        th[0] = 0.0
        turns = [ChatTurn(_words(rng, uw[j]), int(min(at[j], output_cap or at[j])), float(th[j]))
                 for j in range(k)]
        sessions.append(ChatSession(f"chat-{i}", float(starts[i]), system, turns))
    opts = dict(workload="chat", n_sessions=n_sessions, rate=rate, rate_unit="sessions/s",
                seed=seed, salt=salt, turns=[turns_min, turns_max], user_words=list(user_words),
                answer_tokens=list(answer_tokens), think_s=think_s, output_cap=output_cap)
    return Workload("chat", "chat", sessions=sessions, options=opts)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None     # JSON has no Infinity


def _finish(wl: Workload) -> Workload:
    if wl.requests:
        lens = np.array([r.prompt_len for r in wl.requests])
        outs = np.array([r.max_new_tokens for r in wl.requests])
        wl.options.update(mean_input=float(lens.mean()), max_input=int(lens.max()),
                          mean_output=float(outs.mean()),
                          offered_rate=_finite(mean_rate([r.t for r in wl.requests])),
                          span_s=wl.span_s)
    return wl


# ---------------------------------------------------------------------------- by name

WORKLOADS = ("conversation", "mooncake-synthetic", *SYNTHETIC, "mixed", "chat")


def build(name: str, *, rate: float, duration_s: float, n: int | None = None, offset: int = 0,
          seed: int = 0, salt: str = "", input_cap: int | None = None,
          output_cap: int | None = None, arrival: str = "trace", trace_path_: str | None = None,
          turns: tuple[int, int] = (2, 6), think_s: float = 3.0,
          vocab: tuple[int, int] = VOCAB, session_sample: int = 1, warm_history: bool = False) -> Workload:
    """The workload of one rate point: ``n`` (default round(rate*duration)) requests/sessions
    offered at ``rate``; ``warm_history``: with ``Workload.warm``, the trace's history that the
    point reuses (``warm_prefixes``; traces only)."""
    count = n if n is not None else max(1, round(rate * duration_s))
    if name in TRACES:
        src = trace_path(name, trace_path_)
        wl = trace_workload(sample_sessions(load_trace(name, src), session_sample), name=name, n=count,
                            offset=offset, rate=rate, arrival=arrival, input_cap=input_cap,
                            output_cap=output_cap, seed=seed, salt=salt, source=str(src), vocab=vocab,
                            warm_history=warm_history)
        wl.options["session_sample"] = session_sample
        return wl
    if warm_history:
        raise ValueError(f"--warm-history applies to the traces ({', '.join(TRACES)}), not {name!r}")
    if session_sample != 1:
        raise ValueError(f"--session-sample applies to the traces ({', '.join(TRACES)}), not {name!r}")
    if name in SYNTHETIC:
        return synthetic_workload(name, n=count, rate=rate, seed=seed, salt=salt,
                                  input_cap=input_cap, output_cap=output_cap, vocab=vocab)
    if name == "mixed":
        return mixed_workload(n=count, rate=rate, seed=seed, salt=salt, input_cap=input_cap,
                              output_cap=output_cap, vocab=vocab)
    if name == "chat":
        return chat_workload(n_sessions=count, rate=rate, seed=seed, salt=salt,
                             turns_min=turns[0], turns_max=turns[1], think_s=think_s,
                             output_cap=output_cap)
    raise ValueError(f"unknown workload {name!r}; choose from {WORKLOADS}")


# ---------------------------------------------------------------------------- as a trace file

def trace_rows(wl: Workload) -> list[dict]:
    """The workload's requests as Mooncake-format trace rows (``sglang_mux.traces``): timestamp
    (ms from the first send, rounded to 1 µs), input_length and output_length (tokens), and
    empty ``hash_ids``: the simulator sees no prefix reuse, which the synthetic sets do not have
    beyond OpenThoughts' 243-token system prompt. Chat sessions (closed-loop turns, prompts
    that grow with the server's answers) are no trace: ValueError."""
    if wl.kind != "generate" or wl.sessions:
        raise ValueError(f"workload {wl.name!r} is chat sessions, not a list of requests: it has no trace form")
    if wl.name in TRACES:
        raise ValueError(f"workload {wl.name!r} is a trace already: give its file to the simulator "
                         "(its hash_ids carry the prefix reuse this form drops)")
    return [{"timestamp": round(r.t * 1e3, 3), "input_length": r.prompt_len,
             "output_length": int(r.max_new_tokens), "hash_ids": []} for r in wl.requests]


def write_trace(wl: Workload, path: str | Path) -> int:
    """Write ``trace_rows(wl)`` to ``path`` as JSON lines; returns the number of rows.
    ``python -m sglang_mux.sim --trace PATH`` replays the file's arrivals, or with
    ``--arrival poisson --rate R --seed S`` the very arrivals ``bench.run`` sends at rate R
    (the same draw, ``traces.poisson_arrivals``); the lengths are a ``bench.run`` point's
    when ``wl`` was built with its salt (``rate=<R>``, as ``python -m bench.workloads`` does)."""
    rows = trace_rows(wl)
    Path(path).write_text("".join(json.dumps(x) + "\n" for x in rows))
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    pos = cli.positive(float)
    ap = cli.ArgumentParser(prog="python -m bench.workloads",
                            description="Write a synthetic workload's requests as a JSONL trace for the simulator.")
    ap.add_argument("workload", choices=(*SYNTHETIC, "mixed"), help="the generator (bench.run --workload)")
    ap.add_argument("--rate", type=pos, required=True, help="requests/s (Poisson arrivals)")
    ap.add_argument("--duration-s", type=pos, default=120.0, help="round(rate x duration) requests")
    ap.add_argument("--num-requests", type=cli.positive(int), default=None, help="override round(rate x duration)")
    ap.add_argument("--seed", type=cli.seed, default=0, help="a whole number >= 0")
    ap.add_argument("--input-cap", type=cli.positive(int), default=None, help="keep the first T prompt tokens")
    ap.add_argument("--output-cap", type=cli.positive(int), default=None, help="keep at most this many output tokens")
    ap.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    a = ap.parse_args(argv)
    # bench.run salts each rate point so: the same salt gives the same lengths as its point
    wl = build(a.workload, rate=a.rate, duration_s=a.duration_s, n=a.num_requests, seed=a.seed,
               salt=f"rate={a.rate:g}", input_cap=a.input_cap, output_cap=a.output_cap)
    n = write_trace(wl, a.out)
    o = wl.options
    print(f"{a.out}: {n} requests, mean input {o['mean_input']:.0f}, mean output {o['mean_output']:.1f} tokens, "
          f"offered {o['offered_rate']:.3g} req/s")
    return 0


if __name__ == "__main__":
    cli.run(main)
