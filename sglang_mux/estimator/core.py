"""Contention-tolerant estimator (MuxWise §3.3): worst-case decode = solo × contention guard
(+ the serving iteration's fixed cost), and prefill = solo × an online correction.

- ``Estimator.from_table(dir)``: solo fits (fit.json, ``latency_model``) + grid guard
  (guard.json, ``contention_guard``), at TP > 1 plus the rank's all-reduces on prefill
  (allreduce.json, ``latency_model.allreduce``); a malformed or mismatching table raises
  TableError naming the file and the command that rewrites it.
- ``Estimator.cold_start(shape, probe, ...)``: roofline solo times and a constant guard (1.3),
  with a warning saying how to profile; ``Estimator.for_model``: a table of this model shape,
  GPU and attention backend, else cold start.
- Hot path (ms, whole model): ``prefill_ms``, ``fused_ms`` (a mixed chunk: prompt pieces and
  one-token decode rows in one extend batch on the whole GPU: the table's fused model where it has
  one, else the solo fit), ``decode_solo_ms``, ``decode_worst_ms``,
  ``guard_slowdown`` (>= 1; 1.0 when ``decode_sms == total_sms`` or ``prefill_new == 0``).
  Decode takes the batch's longest context ``max_reused`` (None: Σr/bs, a uniform batch).
- Online refinement (``observe_decode``, ``observe_prefill``, ``observe_prefill_launch``,
  ``observe_fused``): the guard's raise and host scale, the serving decode offset (EWMA of
  measured − solo, >= 0), a per-partition prefill EWMA (ratio kept within 0.25..4), the host's
  per-layer launch time (a prefill takes at least layers x that), the fused iteration's served time
  (``fused_price``), a layer-wise batch's wall time over its planned T_P (``prefill_wall``, fed by
  the server's loop), with a cold start a rise-fast/decay-slow decode correction. Observations
  outside the plausible bounds are dropped, never raise.

It is the policy's `EstimatorLike` (`sglang_mux.policy.protocol`). docs/estimator.md gives the why
and the measurements behind each rule.
"""

from __future__ import annotations

import argparse
import copy
import logging
import warnings
from pathlib import Path
from typing import Callable, Mapping, Sequence

from sglang_mux.contention_guard import ConstantGuard, ContentionGuard
from sglang_mux.fused_price import (DECODE_ROW_MS, FusedPrice, captured_size, graph_cliffs, graph_padding,
                                    sglang_graph_tokens)
from sglang_mux.latency_model import DecodeRows, PrefillReq, SoloLatencyModel
from sglang_mux.latency_model import fused
from sglang_mux.latency_model.allreduce import AllReduceCost
from sglang_mux.partitions import partition_configs
from sglang_mux.prefill_wall import PrefillWall
from sglang_mux.roofline import DEFAULT_H100_PROBE, RooflineModel
from sglang_mux.tables import (ALLREDUCE, CONTENTION, FIT, FUSED_ROWS, GUARD, SOLO_DECODE, SOLO_PREFILL, ModelShape,
                               TableError, find_table, other_tables, read_table, resolve_table, slug, table_dirname)

logger = logging.getLogger(__name__)

COLD_START_GUARD = 1.3
MAX_PLAUSIBLE_SLOWDOWN = 2.0
DECODE_CORR_UP, DECODE_CORR_DOWN = 0.5, 0.01  # cold-start decode correction: rise fast, decay slowly
DECODE_CORR_BOUNDS = (0.1, 50.0)  # measured/predicted outside this is a glitch (or a stall)
PREFILL_EWMA_ALPHA = 0.1
PREFILL_RATIO_BOUNDS = (0.25, 4.0)  # measured/predicted outside this is a glitch, not a trend
DECODE_OFFSET_ALPHA = 0.05
DECODE_OFFSET_MAX_MS = 3.0  # an excess beyond this is a stall (GC, preemption), not the fixed cost
HOST_EWMA_ALPHA = 0.2  # the host's speed moves within seconds: follow it quickly
HOST_LAYER_MS_MAX = 20.0  # one layer's launches taking longer is a stall (GC, preemption), not a rate


class Estimator:
    """Solo-run predictor × contention guard (module docstring; docs/estimator.md)."""

    def __init__(self, solo, guard, num_layers: int, total_sms: int, granularity: int = 16,
                 source: str = ""):
        self._solo = solo  # SoloLatencyModel or RooflineModel
        self._guard = guard  # ContentionGuard or ConstantGuard
        self.num_layers = int(num_layers)
        self.total_sms = int(total_sms)
        self.granularity = int(granularity)
        self.decode_sms_options: list[int] = [c.decode_sms for c in partition_configs(total_sms, granularity)]
        self.prefill_sms_options: list[int] = [self.total_sms - d for d in self.decode_sms_options]
        self.source = source
        self._prefill_corr: dict[int, float] = {}
        self._host_layer_ms: float | None = None  # host launch time per prefill layer (online)
        self._dropped = 0
        self._decode_offset_ms = 0.0  # serving's fixed decode cost beyond the table's (online)
        # cold start: learn the roofline's decode error online (docs/estimator.md)
        self.learn_decode = source == "cold-start"
        self._decode_corr: dict[int, float] = {}
        self._decode_corr_max = 1.0
        self.fused_price = FusedPrice()  # served fused iterations vs their solo price (online)
        self.prefill_wall = PrefillWall()  # served layer-wise batches' wall time vs their planned T_P
        # The token counts SGLang's prefill CUDA graph was captured at (ascending; the server sets
        # them at start, a simulator as it plays one): a fused batch runs padded to the next one.
        self.graph_tokens = ()
        # TP > 1: the rank's all-reduces, which its table's one-GPU timings lack (from_table loads
        # them). Layer-wise and fused prefill pay them; decode's, inside its CUDA graph, are left to
        # the online decode offset (the profiled ones are eager, their small-size floor a launch's).
        self.allreduce: AllReduceCost | None = None
        # The table's fused-iteration model (fit.json ``fused``, fitted on its fused rows); None:
        # fused batches are priced by the solo fit and DECODE_ROW_MS (`fused_base_ms`).
        self.fused_model: fused.FusedModel | None = None

    @property
    def graph_tokens(self) -> tuple[int, ...]:
        return self._graph_tokens

    @graph_tokens.setter
    def graph_tokens(self, sizes: Sequence[int]) -> None:
        """Also ``graph_cliffs``: the captured sizes slower than a larger one (`graph_cliffs`, by
        the table's GEMM curve on the whole GPU; none without a curve), and by how much."""
        self._graph_tokens = tuple(sizes)
        curve = getattr(self._solo, "gemm_curve", None)
        self.graph_cliffs: dict[int, float] = graph_cliffs(
            self._graph_tokens, lambda m: curve.at(self.total_sms, m)) if curve is not None else {}

    def fused_prior_holds(self) -> bool:
        """Whether a fused batch's base price may be acted on in full before any fused iteration
        is seen (`FusedPrice.prior_holds`): through SGLang's prefill CUDA graph (``graph_tokens``)
        a table's base price is near what serving measures, a roofline's is not (the cold start:
        the tiny model at TP 2 priced a 4,096-token chunk at 0.58 ms and ran it in 4.4)."""
        return bool(self.graph_tokens) and self.source != "cold-start"

    def fresh_planner(self) -> "Estimator":
        """A copy that plans as a server starts: the fused price back to its prior (acted on in
        full where `fused_prior_holds`), to be learned from what runs."""
        planner = copy.deepcopy(self)
        planner.fused_price = FusedPrice(prior_holds=planner.fused_prior_holds())
        return planner

    def with_prefill_graph(self, max_tokens: int) -> "Estimator":
        """This estimator as a server whose SGLang prefill CUDA graph is captured up to
        ``max_tokens`` prices a fused batch: a copy padding it to the graph's sizes."""
        est = copy.copy(self)
        est.graph_tokens = sglang_graph_tokens(max_tokens)
        return est

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_table(cls, path: str | Path, *, model_shape=None, gpu_name: str | None = None,
                   total_sms: int | None = None, granularity: int | None = None,
                   attention_backend: str | None = None, tp_size: int | None = None) -> "Estimator":
        """Load a fitted table; the optional arguments make it refuse a mismatching table."""
        path = Path(path)
        t = read_table(path, model_shape=model_shape, gpu_name=gpu_name, total_sms=total_sms,
                       attention_backend=attention_backend, tp_size=tp_size)
        total = t.sm_count
        gran = int(granularity or t.granularity)
        try:
            dec = [c.decode_sms for c in partition_configs(total, gran)]
        except ValueError as e:
            raise TableError(path / "meta.json", str(e)) from None
        pre = [total - d for d in dec]
        read_table_sms_check(t, dec, pre)
        refit = f"; rewrite it: python -m sglang_mux.estimator fit {path}"
        try:
            solo = SoloLatencyModel.from_dict(t.fit)
        except (KeyError, TypeError, ValueError) as e:
            raise TableError(path / FIT, f"bad coefficients ({e}){refit}") from None
        for kind, want, have in (("decode", dec, solo.decode_sms), ("prefill", pre, solo.prefill_sms)):
            missing = sorted(set(want) - set(have))
            if missing:
                raise TableError(path / FIT, f"no {kind} fit for SM counts {missing}{refit}")
        try:
            guard = ContentionGuard.from_dict(t.guard)
        except (KeyError, TypeError, ValueError) as e:
            raise TableError(path / GUARD, f"bad grid ({e}){refit}") from None
        missing = sorted(set(dec) - set(guard.partitions))
        if missing:
            raise TableError(path / GUARD, f"SM counts {missing} not in the guard{refit}")
        est = cls(solo, guard, t.model_shape.num_layers, total, gran, source=f"table:{path} ({t.attention_backend})")
        est.fused_model = _table_fused_model(t, refit)
        if t.tp_size > 1:
            try:
                est.allreduce = AllReduceCost.from_json(path / ALLREDUCE)
            except (OSError, ValueError) as e:
                raise TableError(path / ALLREDUCE, f"a TP-{t.tp_size} table needs its all-reduce timings ({e}); "
                                 f"measure them on {t.tp_size} GPUs: python -m profiling.allreduce --tp-size "
                                 f"{t.tp_size} --hidden {t.model_shape.hidden_size} --out {path / ALLREDUCE}") from None
            if est.allreduce.hidden != t.model_shape.hidden_size:
                raise TableError(path / ALLREDUCE, f"all-reduces timed {est.allreduce.hidden} wide; the model's hidden "
                                 f"size is {t.model_shape.hidden_size}")
        return est

    @classmethod
    def cold_start(cls, model_shape, probe: Mapping | None = None, total_sms: int = 132,
                   granularity: int = 16, guard: float = COLD_START_GUARD, *,
                   warn: bool = True, hint: str | None = None) -> "Estimator":
        """Roofline solo times + a constant guard; warns that the decisions are uncalibrated."""
        shape = ModelShape.coerce(model_shape)
        if warn:
            msg = (f"no contention table for {shape.architecture} ({shape.num_layers} layers, hidden "
                   f"{shape.hidden_size}); using a roofline cold-start estimate with a constant "
                   f"{guard}x contention guard. Profile this model on this GPU for SLO-grade decisions: "
                   + (hint or "python -m profiling.run --model-config <config.json> --out contention_tables/<model>__<gpu>"))
            logger.warning(msg)
            warnings.warn(msg, stacklevel=2)
        solo = RooflineModel.from_probe(probe if probe is not None else DEFAULT_H100_PROBE, shape)
        return cls(solo, ConstantGuard(guard), shape.num_layers, total_sms, granularity, source="cold-start")

    @classmethod
    def for_model(cls, model_config, gpu_name: str, total_sms: int, tables_root: str | Path,
                  attention_backend: str, probe: Mapping | Callable[[], Mapping | None] | None = None,
                  granularity: int = 16, table_dir: str | Path | None = None, tp_size: int = 1) -> "Estimator":
        """``model_config``: HF config.json path or dict (or a meta-style shape dict);
        ``attention_backend``: the one the server runs (SGLang's resolved choice); ``tp_size``:
        its tensor-parallel degree (a table of another TP is never used).

        ``table_dir`` (``--mux-contention-table DIR``): use exactly that table; a mismatch
        with the model, GPU, SM count or attention backend raises TableError instead of
        falling back. A found table that is malformed raises too (never a silent cold start).
        """
        shape = ModelShape.coerce(model_config)
        kw = dict(model_shape=shape, gpu_name=gpu_name, total_sms=total_sms, granularity=granularity,
                  attention_backend=attention_backend, tp_size=tp_size)
        if table_dir is not None:
            return cls.from_table(table_dir, **kw)
        found = find_table(tables_root, shape, gpu_name, attention_backend, tp_size)
        if found is not None:
            return cls.from_table(found, **kw)
        name = _model_name(model_config, shape)
        cfg = str(model_config) if isinstance(model_config, (str, Path)) else f"<{name} config.json>"
        hint = (f"python -m profiling.run --model-config {cfg} --attention-backend {attention_backend} "
                f"--out {Path(tables_root) / table_dirname(name, gpu_name, attention_backend, tp_size)}")
        if tp_size > 1:
            hint += f" --tp-size {tp_size}"
        others = other_tables(tables_root, shape, gpu_name, attention_backend, tp_size)
        if others:
            tp = any(t != tp_size for _, t, _ in others)
            named = "; ".join(f"{b}{f', TP={t}' if t != tp_size else ''}: {d}" for b, t, d in others)
            hint += (f" (not used, made with another attention backend{' or --tp-size' if tp else ''}: "
                     f"{named}; or serve with that --attention-backend{' / --tp-size' if tp else ''})")
        if not Path(tables_root).is_dir():
            hint += f" (looked for tables in {tables_root}: no such directory)"
        if callable(probe):  # probe lazily: the GPU is measured only when no table matched
            probe = probe()
        # At TP each GPU computes one rank's share (the all-reduces are not in the roofline).
        return cls.cold_start(shape.per_rank(tp_size), probe, total_sms, granularity, hint=hint)

    # ------------------------------------------------------------------ predictions (hot path)

    def prefill_ms(self, prefill_sms: int, reqs: Sequence[PrefillReq]) -> float:
        """Whole-model prefill latency: the solo GPU estimate times the partition's online
        correction, or the host's time to launch every layer if that is longer."""
        gpu = self._prefill_gpu_ms(prefill_sms, reqs) * self._prefill_corr.get(prefill_sms, 1.0)
        return max(gpu, self.host_prefill_ms())

    def _prefill_gpu_ms(self, prefill_sms: int, reqs: Sequence[PrefillReq], extra: DecodeRows | None = None) -> float:
        """The solo fit and, at TP > 1, the rank's all-reduces over the batch's tokens (``extra``:
        more rows, summed beforehand: `decode_rows`)."""
        t = self._solo.prefill_ms(prefill_sms, reqs, extra)
        if not self.allreduce:
            return t
        return t + self.allreduce.forward_ms(sum(r.n for r in reqs) + (len(extra.contexts) if extra else 0),
                                             self.num_layers)

    def decode_rows(self, decode_contexts: Sequence[int]) -> DecodeRows:
        """A fused iteration's one-token decode rows on their contexts, summed once for every
        chunk a plan prices beside them (`fused_ms`): a walk over hundreds of rows for each of a
        plan's dozen prices would cost a decision milliseconds."""
        return self._solo.decode_rows(decode_contexts)

    def fused_ms(self, pieces: Sequence[PrefillReq], decode_contexts: Sequence[int] | DecodeRows) -> float:
        """One fused (mixed) iteration on the whole GPU, as SGLang runs a chunk with
        ``--enable-mixed-chunk``: one extend batch of the prompt ``pieces`` (each with the tokens
        before it as reused context) and one new token per decoding request on its context
        (``decode_contexts``, tokens, or those rows summed by `decode_rows`): the table's fused
        model, else the solo prefill fit on ``total_sms`` over those rows plus ``DECODE_ROW_MS``
        per one-token row (`fused_base_ms`), mapped to served time by ``fused_price`` (learned by
        ``observe_fused``; the identity until then). The policy and both simulators use this one
        price; 0.0 for an empty batch."""
        dec = decode_contexts if isinstance(decode_contexts, DecodeRows) else self.decode_rows(decode_contexts)
        if not pieces and not dec.contexts:
            return 0.0
        return self.fused_price.price(self.fused_base_ms(pieces, dec), self.fused_tokens(pieces, dec))

    def fused_tokens(self, rows: Sequence[PrefillReq], extra: DecodeRows | None = None) -> int | None:
        """The prefill graph's captured size a fused batch runs at (its extend rows' tokens and
        ``extra``'s one-token rows, padded: `captured_size`), or None where it runs eagerly (nothing
        captured, or past the graph): the served price learns each captured size's own error
        (`FusedPrice.bias`), a bounded set of them."""
        return captured_size(sum(r.n for r in rows) + (len(extra.contexts) if extra else 0), self.graph_tokens)

    def fused_base_ms(self, rows: Sequence[PrefillReq], extra: DecodeRows | None = None) -> float:
        """A fused batch's price before the served mapping, over its extend rows (``rows`` and the
        summed ``extra``: `decode_rows`) and the prefill graph's padding (`graph_padding` over
        ``graph_tokens``): the table's fused model (`fused_model`) at the padded token count (and
        the GEMM curve's excess there if that is a slow size, ``graph_cliffs``), else
        the solo prefill fit on ``total_sms`` with the padding priced as one more prompt, plus what
        its one-token rows cost beyond one-token queries. At TP > 1 the rank's all-reduces too."""
        k = len(extra.contexts) if extra else 0  # one-token rows, one token each
        if self.fused_model is not None:
            t, nr, nn, ctx = fused.sums(rows)
            t += k
            t += graph_padding(t, self.graph_tokens)  # the padding rows run through the GEMMs, no attention
            ms = self.fused_model.ms(t, nr, nn, ctx + (extra.nr if extra else 0)) + self.graph_cliffs.get(t, 0.0)
            return ms + (self.allreduce.forward_ms(t, self.num_layers) if self.allreduce else 0.0)
        pad = graph_padding(sum(r.n for r in rows) + k, self.graph_tokens)
        solo = self._prefill_gpu_ms(self.total_sms, [*rows, PrefillReq(pad, 0)] if pad else rows, extra)
        return solo + DECODE_ROW_MS * (sum(1 for r in rows if r.n == 1) + k)

    def host_prefill_ms(self) -> float:
        """The host's time to launch a whole prefill (0 until a launch was observed)."""
        h = self._host_layer_ms
        return h * self.num_layers if h is not None else 0.0

    def decode_solo_ms(self, decode_sms: int, bs: int, sum_reused: int, max_reused: int | None = None) -> float:
        """Solo decode latency; ``max_reused`` = longest context (None: Σr/bs, a uniform batch)."""
        t = self._solo.decode_ms(decode_sms, bs, sum_reused, max_reused)
        return t * self.decode_correction(decode_sms) if self.learn_decode else t

    @property
    def decode_offset_ms(self) -> float:
        """The serving iteration's fixed decode cost learned so far (0 until learned, ms)."""
        return self._decode_offset_ms if self._decode_offset_ms > 0.0 else 0.0

    def guard_slowdown(self, decode_sms: int, bs: int, sum_reused: int, prefill_new: int,
                       prefill_reused: int, profiled: bool = False) -> float:
        """The guard in use; ``profiled``: the table's value, before online refinement."""
        if decode_sms >= self.total_sms or prefill_new <= 0:
            return 1.0
        return self._guard.lookup(decode_sms, bs, sum_reused, prefill_new, prefill_reused, profiled=profiled)

    def decode_worst_ms(self, decode_sms: int, bs: int, sum_reused: int, prefill_new: int,
                        prefill_reused: int, max_reused: int | None = None) -> float:
        if bs <= 0:
            return 0.0  # no decode batch, no iteration
        t = self.decode_solo_ms(decode_sms, bs, sum_reused, max_reused)
        if decode_sms < self.total_sms and prefill_new > 0:
            t *= self._guard.lookup(decode_sms, bs, sum_reused, prefill_new, prefill_reused)
        return t + self.decode_offset_ms

    # ------------------------------------------------------------------ online refinement

    def observe_decode(self, decode_sms, bs, sum_reused, prefill_new, prefill_reused, measured_ms,
                       max_reused: int | None = None) -> bool:
        """A measured decode iteration. Co-running: feeds the guard's online refinement
        (contention_guard); returns True when its value for this query went up. No
        co-runner: updates the fixed decode cost. Cold start: every iteration (solo too)
        updates the decode correction instead."""
        if bs <= 0 or not measured_ms > 0:
            return False
        if self.learn_decode:
            # Cold start: the constant guard is the contention allowance (MuxWise's worst, 1.3x)
            # and the correction takes all the rest; raising the guard as well while the
            # correction converges would leave it high for every partition for good.
            self._learn_decode(decode_sms, bs, sum_reused, prefill_new, prefill_reused, measured_ms, max_reused)
            return False
        if decode_sms >= self.total_sms or prefill_new <= 0:
            # No co-runner: nothing to learn about contention, but the solo estimate's miss.
            excess = measured_ms - self._solo.decode_ms(decode_sms, bs, sum_reused, max_reused)
            if excess <= DECODE_OFFSET_MAX_MS:
                self._decode_offset_ms += DECODE_OFFSET_ALPHA * (excess - self._decode_offset_ms)
            return False
        solo = self.decode_solo_ms(decode_sms, bs, sum_reused, max_reused)
        slowdown = (measured_ms - self.decode_offset_ms) / solo
        if slowdown > MAX_PLAUSIBLE_SLOWDOWN:
            self._dropped += 1
            if self._dropped & (self._dropped - 1) == 0:  # log 1st, 2nd, 4th, 8th ... only
                logger.warning("ignoring implausible decode slowdown %.2fx (D%d bs=%d Σr=%d, prefill "
                               "%d+%d; %d dropped so far)", slowdown, decode_sms, bs, sum_reused,
                               prefill_new, prefill_reused, self._dropped)
            return False
        before = self._guard.lookup(decode_sms, bs, sum_reused, prefill_new, prefill_reused)
        self._guard.observe(decode_sms, bs, sum_reused, prefill_new, prefill_reused, slowdown)
        return self._guard.lookup(decode_sms, bs, sum_reused, prefill_new, prefill_reused) > before

    def _learn_decode(self, decode_sms, bs, sum_reused, prefill_new, prefill_reused, measured_ms, max_reused):
        pred = self._solo.decode_ms(decode_sms, bs, sum_reused, max_reused) * \
            self.guard_slowdown(decode_sms, bs, sum_reused, prefill_new, prefill_reused)
        if not pred > 0:
            return
        ratio = measured_ms / pred
        if not DECODE_CORR_BOUNDS[0] <= ratio <= DECODE_CORR_BOUNDS[1]:
            return
        c = self.decode_correction(decode_sms)
        c += (DECODE_CORR_UP if ratio > c else DECODE_CORR_DOWN) * (ratio - c)
        self._decode_corr[decode_sms] = c
        self._decode_corr_max = max(self._decode_corr.values())

    def observe_fused(self, rows: Sequence[PrefillReq], measured_ms: float,
                      extra: DecodeRows | None = None) -> float | None:
        """A served fused iteration of ``measured_ms`` (its time on the forward stream, from the
        batch before it to its own end): ``rows`` = its extend rows (prompt pieces and one-token
        decode rows, each with its cached context), or some of them and the rest summed in
        ``extra`` (`decode_rows`). Returns measured / the price in use before (None: not taken,
        fused_price.RATIO_BOUNDS)."""
        if not rows and not (extra and extra.contexts):
            return None
        return self.fused_price.observe(self.fused_base_ms(rows, extra), measured_ms, self.fused_tokens(rows, extra))

    def decode_correction(self, decode_sms: int) -> float:
        """The cold-start decode correction in use for ``decode_sms`` (1.0 with a table)."""
        return self._decode_corr.get(decode_sms, self._decode_corr_max) if self.learn_decode else 1.0

    def observe_prefill(self, prefill_sms, reqs, measured_ms) -> float | None:
        """A measured whole-model prefill (scale a partial-layer timing by layers first).
        Returns measured / the estimate in use before this observation (None: no estimate).
        While the host's launches are the longer part, the GPU correction is left alone."""
        pred = self._prefill_gpu_ms(prefill_sms, reqs)
        if not (pred > 0 and measured_ms > 0):
            return None
        c = self._prefill_corr.get(prefill_sms, 1.0)
        host = self.host_prefill_ms()
        if host >= pred * c:
            return measured_ms / host
        ratio = measured_ms / pred
        if PREFILL_RATIO_BOUNDS[0] <= ratio <= PREFILL_RATIO_BOUNDS[1]:
            self._prefill_corr[prefill_sms] = c + PREFILL_EWMA_ALPHA * (ratio - c)
        return ratio / c

    def observe_prefill_launch(self, layers: int, host_ms: float) -> bool:
        """The host took ``host_ms`` to launch ``layers`` prefill layers (perf_counter around
        the launch). Returns whether it was taken (a stall above HOST_LAYER_MS_MAX per layer
        is not a launch rate)."""
        if layers <= 0 or not host_ms > 0:
            return False
        per = host_ms / layers
        if per > HOST_LAYER_MS_MAX:
            return False
        h = self._host_layer_ms
        self._host_layer_ms = per if h is None else h + HOST_EWMA_ALPHA * (per - h)
        return True

    def prefill_correction(self, prefill_sms: int) -> float:
        return self._prefill_corr.get(prefill_sms, 1.0)

    @property
    def guard(self):
        return self._guard

    @property
    def solo(self):
        return self._solo

def from_table_arg(parser: argparse.ArgumentParser, name_or_path: str | Path) -> Estimator:
    """``Estimator.from_table`` for a CLI's ``--table``: a shipped table's name or a directory
    (``tables.resolve_table``); a missing or bad table is a usage error (``parser.error``: one
    ``error:`` line with the TableError's message, exit status 2), not a traceback."""
    try:
        return Estimator.from_table(resolve_table(name_or_path))
    except TableError as e:
        parser.error(str(e))


def read_table_sms_check(t, dec, pre) -> None:
    """The partitions the engine will use must be profiled (solo CSVs + contention.csv)."""
    for name, df, col, want in ((SOLO_DECODE, t.solo_decode, "decode_sms", dec),
                                (CONTENTION, t.contention, "decode_sms", dec),
                                (SOLO_PREFILL, t.solo_prefill, "prefill_sms", pre)):
        have = set(int(v) for v in df[col].unique())
        missing = sorted(set(want) - have)
        if missing:
            raise TableError(t.path / name, f"SM counts {missing} not in the table ({col} has {sorted(have)}; "
                                            f"{t.sm_count} SMs at granularity {t.granularity} need {sorted(want)})")


def _model_name(model_config, shape: ModelShape) -> str:
    if isinstance(model_config, (str, Path)):
        p = Path(model_config)
        return slug(p.parent.name if p.name == "config.json" else p.stem)
    for k in ("_name_or_path", "name"):
        if isinstance(model_config, Mapping) and model_config.get(k):
            return slug(str(model_config[k]).split("/")[-1])
    return slug(shape.architecture)


def _table_fused_model(t, refit: str) -> fused.FusedModel | None:
    """fit.json's fused model, which must be fitted on the table's fused rows (as many of them)."""
    d = t.fit.get("fused")
    try:
        model = fused.FusedModel.from_dict(d) if d is not None else None
    except (TypeError, ValueError) as e:
        raise TableError(t.path / FIT, f"bad fused model ({e}){refit}") from None
    fitted, have = d.get("rows") if d is not None else 0, len(t.fused_rows or ())
    if fitted != have:  # rows added or removed since the fit: its price is not theirs
        raise TableError(t.path / FIT, f"its fused model was fitted on {fitted or 'no'} fused rows, {FUSED_ROWS} has "
                                       f"{have or 'none'}{refit}")
    return model
