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
  ``observe_fused``): the
  guard's raise and host scale, the serving decode offset (EWMA of measured − solo, >= 0), a
  per-partition prefill EWMA (ratio kept within 0.25..4), the host's per-layer launch time (a
  prefill takes at least layers x that), the fused iteration's served time (``fused_price``), a
  layer-wise batch's wall time over its planned T_P (``prefill_wall``, fed by the server's loop),
  with a cold start a rise-fast/decay-slow decode correction.
  Observations outside the plausible bounds are dropped, never raise.
- ``fit_table`` / ``check_table``: (re)write fit.json + guard.json (and fit.json's fused model
  when the table has fused rows: ``latency_model.fused``); print held-out accuracy (bounds: max
  10 %, mean 3 % per partition and for the fused rows) and the guard's bound on contention.csv.
  ``add_fused``: a ``bench.prefill_mixed --fused`` output's rows into a table (then refit).

docs/estimator.md gives the why and the measurements behind each rule.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .contention_guard import ConstantGuard, ContentionGuard
from .fused_price import DECODE_ROW_MS, FusedPrice, captured_size, graph_cliffs, graph_padding
from .latency_model import (DecodeHyper, DecodeRows, Fa3Grid, GemmCurves, PrefillReq, SoloLatencyModel,
                            UnprofiledPartition, decode_kernel, l2_knee_tokens, min_batch_tokens)
from .latency_model import fused
from .latency_model.allreduce import AllReduceCost
from .latency_model.fit import heldout_errors, prefill_domain
from .partitions import partition_configs
from .prefill_wall import PrefillWall
from .roofline import DEFAULT_H100_PROBE, RooflineModel
from .tables import (ALLREDUCE, CONTENTION, FIT, FUSED_ROWS, GEMM_CURVE, GUARD, SOLO_DECODE, SOLO_PREFILL, ModelShape,
                     TableError, append_fused_rows, find_table, fused_row, other_tables, read_table, resolve_table,
                     slug, table_dirname, write_json)

__all__ = ["Estimator", "PrefillReq", "TableError", "fit_table", "check_table", "main"]

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
MAX_REL_ERR = 0.10
MEAN_REL_ERR = 0.03
CV_FOLDS = 5


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
        chunk a plan prices beside them (`fused_ms`): a walk over 300 rows for each of a plan's
        dozen prices took its decision to 2.5 ms, served at sharegpt's 60 req/s."""
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


def fused_batch(pieces: Sequence[PrefillReq], decode_contexts: Sequence[int]) -> list[PrefillReq]:
    """A fused iteration's extend rows: the prompt pieces, then a one-token row per decode on its
    context."""
    return list(pieces) + [PrefillReq(1, int(c)) for c in decode_contexts]


def fused_iteration_ms(est, pieces: Sequence[PrefillReq], decode_contexts: Sequence[int]) -> float:
    """A fused iteration's price for an estimator without ``fused_ms`` (the policy's stand-ins):
    its ``prefill_ms`` on ``total_sms`` over `fused_batch`, with no served mapping."""
    rows = fused_batch(pieces, decode_contexts)
    return est.prefill_ms(est.total_sms, rows) if rows else 0.0


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


# ----------------------------------------------------------------------------- fit / check

def table_l2_knee(t) -> int:
    """The prefill L2-spill knee r0 of a table (latency_model): from its GPU and model shape."""
    m = t.rank_shape
    return l2_knee_tokens(t.meta["gpu_name"], m.num_kv_heads, m.head_dim)


def table_decode_kernel(t):
    """The decode grid of a table's model on its GPU (latency_model.DecodeHyper): FA3's for an
    fa3 table (γ fitted), else SGLang's triton grid with k = the stage-1 kernel's measured
    occupancy (meta.json ``profiler.decode_blocks_per_sm``, ``profiling.decode_kernel``) where the
    table has it; without it the fit chooses k."""
    m = t.rank_shape
    if t.attention_backend == "fa3":
        from .latency_model.fa3_kernels import MAX_SPLITS
        return DecodeHyper(head_groups=m.num_kv_heads, max_kv_splits=MAX_SPLITS, device_sms=t.sm_count, fa3=1)
    k = (t.meta.get("profiler") or {}).get("decode_blocks_per_sm") or 0
    return replace(decode_kernel(m.num_heads, m.num_kv_heads, t.sm_count), blocks_per_sm=int(k))


def table_launch_floor(t) -> bool:
    """Whether the fit offers a host launch floor: only for tables whose prefill rows include
    the host's launches (made before the profiler held the host ahead: no ``prefill_timing``)."""
    return (t.meta.get("profiler") or {}).get("prefill_timing") != "gpu"


def table_triton_extend(t) -> bool:
    """Whether the table was profiled with SGLang's triton attention, whose extend kernel
    gives every request of a batch the longest request's query blocks."""
    return t.attention_backend == "triton"


def table_fa3(t) -> Fa3Grid | None:
    """FA3's prefill grid for a table profiled with SGLang's fa3 backend (fa3_kernels), else None."""
    if t.attention_backend != "fa3":
        return None
    m = t.rank_shape
    return Fa3Grid(m.num_heads, m.num_kv_heads, t.sm_count)


def table_gemm_curve(t) -> GemmCurves | None:
    """The table's measured projection times (gemm_curve.csv), None if it has none."""
    return GemmCurves.from_frame(t.gemm_curve) if t.gemm_curve is not None else None


def fit_table(path: str | Path, outside_margin: float | None = None) -> tuple[dict, dict]:
    """(Re)write fit.json and guard.json from a table's raw CSVs; returns both dicts.

    The profiler calls this after writing meta.json and the three CSVs.
    """
    from .contention_guard import OUTSIDE_MARGIN

    t = read_table(path, require_fit=False)
    kernel = table_decode_kernel(t)
    solo = SoloLatencyModel.fit(t.solo_prefill, t.solo_decode, l2_knee=table_l2_knee(t),
                                decode_kernel=kernel, device_sms=t.sm_count,
                                launch_floor=table_launch_floor(t), gemm_curve=table_gemm_curve(t),
                                heads=t.rank_shape.num_heads, padded_query_blocks=table_triton_extend(t),
                                fa3=table_fa3(t))
    if t.gemm_curve is None:
        logger.warning("%s has no %s: the prefill fit models the projections as a bent line, which misses "
                       "cuBLAS's slow token counts by up to ~40%%; measure it: python -m profiling.gemm_curve "
                       "--model-config CONFIG --out %s", t.path, GEMM_CURVE, t.path)
    if not kernel.blocks_per_sm and not kernel.fa3:
        logger.warning("%s/meta.json has no profiler.decode_blocks_per_sm: the decode fit chooses the blocks per SM "
                       "from the rows, which a held-out fold can get wrong; measure it: python -m "
                       "profiling.decode_kernel --model-config CONFIG --table %s", t.path, t.path)
    fit = solo.to_dict()
    if t.fused_rows:
        fit["fused"] = fit_fused(t.fused_rows)
    for kind, df, col, pred in (("prefill", t.solo_prefill, "prefill_sms", solo.predict_prefill_frame),
                                ("decode", t.solo_decode, "decode_sms", solo.predict_decode_frame)):
        for s, g in df.groupby(col):
            err = abs(pred(g) / g["latency_ms"].to_numpy() - 1.0)
            fit[kind][str(int(s))].update(rows=int(len(g)), train_max_rel_err=float(err.max()),
                                          train_mean_rel_err=float(err.mean()))
    # contention.csv rows are uniform batches: r_max = decode_reused_per_req (build passes it).
    guard = ContentionGuard.build(t.contention, solo.decode_ms,
                                  OUTSIDE_MARGIN if outside_margin is None else outside_margin).to_dict()
    write_json(t.path, FIT, fit)
    write_json(t.path, GUARD, guard)
    return fit, guard


def fit_fused(rows: Sequence[Mapping]) -> dict:
    """fit.json's ``fused``: the fused model fitted on a table's fused rows (`tables.read_fused_rows`),
    with the rows' count and its in-sample errors."""
    import numpy as np

    batches, ms = _fused_batches(rows)
    m = fused.fit(batches, ms)
    err = np.abs(np.array([m.price(b) for b in batches]) / np.array(ms) - 1.0)
    return {**m.to_dict(), "rows": len(ms), "train_max_rel_err": float(err.max()),
            "train_mean_rel_err": float(err.mean())}


def add_fused(path: str | Path, results: Sequence[str | Path]) -> list[str]:
    """Append the rows of ``bench.prefill_mixed --fused`` outputs to a table's fused rows and refit
    it (`fit_table`); returns a line per file. A file of another GPU or attention backend, or of
    rows not on the whole GPU, is refused (UsageError) and nothing is written; a run already in the
    table is skipped."""
    from . import cli, cli_io

    t = read_table(path, require_fit=False)
    runs = {r["run"] for r in t.fused_rows or ()}
    new, said = [], []
    for f in results:
        res = cli_io.read_json(f, "bench.prefill_mixed --fused output")
        if not isinstance(res, dict) or res.get("kind") != "fused" or not isinstance(res.get("rows"), list) \
                or not res["rows"]:
            raise cli.UsageError(f"{f}: not a bench.prefill_mixed --fused output (no \"kind\": \"fused\" and rows)")
        rows = res["rows"]
        backend = _result_backend(res)
        if slug(res.get("device") or "unknown") != slug(t.gpu_name) or backend != t.attention_backend:
            raise cli.UsageError(f"{f}: measured on {res.get('device')!r} with {backend!r}; the table is "
                                 f"{t.gpu_name!r} with {t.attention_backend!r}")
        off = [r.get("prefill_sms") if isinstance(r, dict) else None for r in rows
               if not isinstance(r, dict) or r.get("prefill_sms") != t.sm_count]
        if off:
            raise cli.UsageError(f"{f}: rows on {', '.join(sorted({str(x) for x in off}))} SMs; a fused iteration "
                                 f"runs on the whole GPU's {t.sm_count}")
        run = str(res.get("date", f))
        if run in runs:
            said.append(f"{f}: run {run} is in the table already, skipped")
            continue
        runs.add(run)
        try:
            new += [fused_row({**r, "run": run}) for r in rows]
        except (ValueError, TypeError, KeyError) as e:
            raise cli.UsageError(f"{f}: a row is not a fused iteration's ({e})") from None
        said.append(f"{f}: {len(rows)} rows")
    if new:
        append_fused_rows(t.path, new)
        fit_table(t.path)
    return said


def _result_backend(res: Mapping) -> str:
    """The attention backend a bench.prefill_mixed output was measured with: its field, else its
    command's ``--attention-backend`` (outputs before the field), else the tool's default."""
    import re

    m = re.search(r"--attention-backend[= ](\S+)", str(res.get("command", "")))
    return str(res.get("attention_backend") or (m.group(1) if m else "triton"))


def _fused_batches(rows: Sequence[Mapping]) -> tuple[list[list[PrefillReq]], list[float]]:
    return [[PrefillReq(n, r) for n, r in x["reqs"]] for x in rows], [x["measured_ms"] for x in rows]


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


# Fewest rows per partition for a held-out check: twice its own θs (4 prefill, 3 decode; the
# extensions add pooled hyper-parameters and θ5 = κ·θ2, no free per-partition coefficient).
MIN_ROWS = {"prefill": 8, "decode": 6, "fused": 2 * len(fused.FUSED_FEATURES)}


def check_table(path: str | Path, out=sys.stdout, progress: Callable[[str], None] | None = None) -> bool:
    """Print the held-out fit accuracy and guard range per partition; True if all bounds hold.

    ``progress``: called with a line before each slow step (the CLI writes them to stderr).
    Raises TableError on a malformed table.
    """
    import numpy as np

    est = Estimator.from_table(path)
    t = read_table(path)
    ok = True
    print(f"table {t.path}: {t.meta['gpu_name']} ({t.sm_count} SMs), {t.model_shape.architecture} "
          f"{t.model_shape.num_layers} layers; bounds: held-out max <= {MAX_REL_ERR:.0%}, mean <= {MEAN_REL_ERR:.0%}",
          file=out)
    knee, kernel, curve = table_l2_knee(t), table_decode_kernel(t), table_gemm_curve(t)
    if isinstance(est.solo, SoloLatencyModel):
        pt = est.solo.pooled_terms()
        fa3 = est.solo.prefill_hyper.fa3
        print("fit.json: " + (f"FA3 grid (packed GQA, split-KV for {fa3.device_sms} SMs), " if fa3 else "")
              + f"waves {pt['wave_tokens_per_sm'] or 'off'} tok/SM, L2 knee {pt['l2_knee_tokens'] or 'off'} "
              f"(spill x{1 + pt['l2_spill_ratio']:.3g}), "
              + (f"launch floor {pt['launch_floor_ms']:.2f} ms, " if pt['launch_floor_ms'] else
                 "no launch floor (" + ("rows time the GPU alone), " if not table_launch_floor(t) else "none fits), "))
              + "GEMM waves "
              + (f"to {pt['gemm_waves_tokens'][0]}..{pt['gemm_waves_tokens'][1]} tokens, " if pt['gemm_waves_tokens'][0]
                 else "off, ")
              + "token knees " + ("/".join(str(k) for k in pt["gemm_knee_tokens"] if k) or "off")
              + f", cold prefix reads {pt['cold_prefix_ms_per_token'] * 1e3:.3g} µs/token, "
              + ("GEMM curve x{0:.3g}..{1:.3g}, ".format(*pt["gemm_curve_scale"]) if est.solo.gemm_curve is not None
                 else "no GEMM curve, ")
              + "decode "
              + (f"FA3 grid, floor {pt['decode_floor_ms_per_token'] * 1e3:.3g} µs per key of the busiest SM, "
                 "a second block on an SM costs γ of one (fitted per partition: "
                 + ", ".join(f"{g:.2f} on {k}" for k, g in pt["decode_fa3_gamma"].items()) + ") "
                 if kernel.fa3 else
                 f"floor {pt['decode_floor_ms_per_token'] * 1e3:.3g} µs per key-wave token "
                 f"({pt['decode_blocks_per_sm']} blocks/SM per wave, "
                 f"{'measured' if kernel.blocks_per_sm else 'fitted'}"
                 f"{', split tails' if est.solo.decode_hyper.min_block_kv else ''}) "
                 if pt['decode_blocks_per_sm'] else
                 f"floor {pt['decode_floor_ms_per_token'] * 1e3:.3g} µs/token of r_max ")
              + ("and compute-bound projections past b_c requests (fitted per partition: "
                 + ", ".join(f"{b:.0f} on {k}" for k, b in pt["decode_compute_knee_bs"].items()) + ") "
                 if pt["decode_compute_knee_bs"] else "")
              + "(held-out below: refitted without the rows it predicts)", file=out)
    for kind, df, col in (("prefill", t.solo_prefill, "prefill_sms"), ("decode", t.solo_decode, "decode_sms")):
        if progress is not None:
            progress(f"{kind}: refitting {df[col].nunique()} partitions {CV_FOLDS} times, each without the rows "
                     "it then predicts")
        errs = heldout_errors(kind, df, folds=CV_FOLDS, l2_knee=knee, decode_kernel=kernel, device_sms=t.sm_count,
                              launch_floor=table_launch_floor(t), gemm_curve=curve, heads=t.rank_shape.num_heads,
                              fa3=table_fa3(t))
        for s, err in errs.items():
            if len(err) < MIN_ROWS[kind]:
                ok = False
                print(f"{kind:8s} sms={int(s):4d} rows={len(err):5d}  too few rows for a held-out check  FAIL", file=out)
                continue
            good = err.max() <= MAX_REL_ERR and err.mean() <= MEAN_REL_ERR
            ok &= bool(good)
            print(f"{kind:8s} sms={int(s):4d} rows={len(err):5d}  held-out rel err max {err.max():6.2%} "
                  f"mean {err.mean():6.2%}  {'OK' if good else 'FAIL'}", file=out)
        if kind == "prefill":
            ok &= _check_small_batches(est, df, out, min_batch_tokens(curve))
            _report_curve(curve, out)
    if progress is not None and t.fused_rows:
        progress(f"fused: refitting the fused model {CV_FOLDS} times, each without the rows it then predicts")
    ok &= _check_fused(est, t, out)
    ct = t.contention
    if progress is not None:
        progress(f"guard: worst case against {len(ct)} co-run rows")
    for d, g in ct.groupby("decode_sms"):
        d = int(d)
        raw = (g["decode_corun_ms"] / g["decode_solo_ms"]).to_numpy()
        # Contention rows are uniform batches: r_max = the per-request context.
        worst = np.array([est.decode_worst_ms(d, int(b), int(round(b * r)), int(pn), int(pr), max_reused=r)
                          for b, r, pn, pr in zip(g["decode_bs"], g["decode_reused_per_req"],
                                                  g["prefill_new"], g["prefill_reused"])])
        miss = int((worst < g["decode_corun_ms"].to_numpy() * (1 - 1e-9)).sum())
        ok &= miss == 0
        cells = est.guard.cell_values(d) if d in est.guard.partitions else []
        cell_rng = f"cells {min(cells):.3f}..{max(cells):.3f}" if cells else "cells: not in guard.json"
        print(f"guard    sms={d:4d} rows={len(g):5d}  measured slowdown min {raw.min():.3f} max {raw.max():.3f}  "
              f"{cell_rng}  worst<corun rows {miss}  {'OK' if miss == 0 else 'FAIL'}", file=out)
    print("check: " + ("OK" if ok else "FAILED"), file=out)
    return ok


def _check_fused(est: "Estimator", t, out) -> bool:
    """The fused model's held-out errors on the table's fused rows, against the same bounds; a
    table without fused rows passes (its fused price is the solo fit's, said)."""
    if not t.fused_rows:
        print(f"fused    no {FUSED_ROWS}: a fused iteration is priced by the solo prefill fit + {DECODE_ROW_MS} ms "
              "per decode row (add measured ones: python -m sglang_mux.estimator add-fused DIR FILE)", file=out)
        return True
    n = len(t.fused_rows)
    if n < MIN_ROWS["fused"]:
        print(f"fused    sms={t.sm_count:4d} rows={n:5d}  too few rows for a held-out check  FAIL", file=out)
        return False
    err = fused.heldout_errors(*_fused_batches(t.fused_rows), folds=CV_FOLDS, knots=est.fused_model.knots)
    good = bool(err.max() <= MAX_REL_ERR and err.mean() <= MEAN_REL_ERR)
    print(f"fused    sms={t.sm_count:4d} rows={n:5d}  held-out rel err max {err.max():6.2%} mean {err.mean():6.2%}  "
          f"{'OK' if good else 'FAIL'} (token bands, knots {'/'.join(map(str, est.fused_model.knots))})", file=out)
    return good


def _check_small_batches(est: "Estimator", df, out, min_tokens: int) -> bool:
    """Without a GEMM curve, rows of batches below MIN_BATCH_TOKENS are predicted as an upper
    bound (the 128-token batch's token-linear work): report predicted/measured; fail if any
    is more than the error bound under."""
    small = prefill_domain(df, min_tokens)[1]
    if not len(small) or not isinstance(est.solo, SoloLatencyModel):
        return True
    ratio = est.solo.predict_prefill_frame(small) / small["latency_ms"].to_numpy()
    good = bool(ratio.min() >= 1.0 - MAX_REL_ERR)
    print(f"prefill  below {min_tokens} batch tokens: {len(small)} rows on {small['prefill_sms'].nunique()} "
          f"partitions, predicted/measured {ratio.min():.2f}..{ratio.max():.2f} (a bound, not fitted; "
          f"must stay >= {1 - MAX_REL_ERR:.2f})  {'OK' if good else 'FAIL'}", file=out)
    return good


def _report_curve(curve: GemmCurves | None, out) -> None:
    """How far a token count between the curve's points may be off: each inner point
    predicted from its two neighbours (information, no bound: cuBLAS's choices jump)."""
    if curve is None:
        print("gemm     no gemm_curve.csv: prefill projections modelled as a bent line (profile one: "
              "python -m profiling.gemm_curve)", file=out)
        return
    errs = [(abs(e), t, s) for s in curve.sms for t, e in curve.leave_one_out(s)]
    if not errs:
        return
    med = sorted(e for e, _, _ in errs)[len(errs) // 2]
    worst = max(errs)
    points = sum(len(curve.points(s)[0]) for s in curve.sms)
    print(f"gemm     curve: {points} points on {len(curve.sms)} partitions; a point "
          f"interpolated from its neighbours is off by median {med:.1%}, max {worst[0]:.0%} ({int(worst[1])} tokens "
          f"on {worst[2]} SMs): the risk between measured token counts", file=out)


def predict(path: str | Path, prefill_new: int, prefill_reused: int, decode_bs: int,
            decode_reused: int, decode_sms: int, decode_max_reused: int | None = None) -> dict:
    """The ``predict`` subcommand's JSON object (ms). ``path``: a table's name or directory;
    ``decode_reused`` is Σ reused of the batch, ``decode_max_reused`` its longest context (None:
    Σ/bs, a uniform batch). A bad table: TableError; an unprofiled partition: UnprofiledPartition."""
    est = Estimator.from_table(resolve_table(path))
    prefill_sms = est.total_sms - decode_sms
    g = est.guard_slowdown(decode_sms, decode_bs, decode_reused, prefill_new, prefill_reused)
    return {
        "decode_sms": decode_sms,
        "prefill_sms": prefill_sms,
        "decode_solo_ms": est.decode_solo_ms(decode_sms, decode_bs, decode_reused, decode_max_reused),
        "decode_worst_ms": est.decode_worst_ms(decode_sms, decode_bs, decode_reused, prefill_new, prefill_reused,
                                               decode_max_reused),
        "guard_slowdown": g,
        "prefill_solo_ms": (est.prefill_ms(prefill_sms, [PrefillReq(prefill_new, prefill_reused)])
                            if prefill_sms > 0 and prefill_new > 0 else None),
    }


def _progress(start: float) -> Callable[[str], None]:
    """``check``'s progress lines: to stderr (stdout stays the report), with the time so far."""
    import time

    def say(line: str) -> None:
        print(f"check: {line} ({time.monotonic() - start:.0f} s so far)", file=sys.stderr, flush=True)

    return say


def main(argv: Sequence[str] | None = None) -> int:
    """fit | check | predict. Returns 0, 1 (check: bounds missed) or 2 (a bad table or
    partition, said on one ``error:`` line on stderr); bad arguments exit with status 2."""
    import time

    from . import cli

    table_help = ("a shipped table's name (e.g. llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3) or a "
                  "contention_tables/<model>__<gpu>__<backend>/ dir")
    nonneg = cli.positive(int, allow_zero=True)
    ap = cli.ArgumentParser(prog="python -m sglang_mux.estimator", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fit", help="(re)write fit.json and guard.json from the CSVs").add_argument("dir", help=table_help)
    sub.add_parser("check", help="held-out fit accuracy and guard bound; rc 0 ok, 1 bounds missed, 2 malformed"
                   ).add_argument("dir", help=table_help)
    p = sub.add_parser("add-fused", help=f"add bench.prefill_mixed --fused outputs to the table's {FUSED_ROWS} "
                       "and refit it")
    p.add_argument("dir", help=table_help)
    p.add_argument("files", nargs="+", help="bench.prefill_mixed --fused --out files (GPU, attention backend and "
                   "SM count of the table's)")
    p = sub.add_parser("predict", help="solo and worst-case estimates as JSON")
    p.add_argument("dir", help=table_help)
    p.add_argument("--prefill-new", type=nonneg, required=True, help="new tokens of the prefill (0 = none)")
    p.add_argument("--prefill-reused", type=nonneg, default=0, help="reused (cached) tokens of the prefill")
    p.add_argument("--decode-bs", type=nonneg, required=True, help="requests in the decode batch")
    p.add_argument("--decode-reused", type=nonneg, default=0,
                   help="reused (context) tokens per decode request, as in contention.csv")
    p.add_argument("--decode-max-reused", type=nonneg, default=None,
                   help="longest context in the decode batch (default: --decode-reused, a uniform batch)")
    p.add_argument("--decode-sms", type=cli.positive(int), required=True, help="SMs of the decode partition")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "fit":
            d = resolve_table(a.dir)
            fit, guard = fit_table(d)
            fz = f", fused model on {fit['fused']['rows']} rows" if "fused" in fit else ""
            print(f"wrote {d / FIT} ({len(fit['prefill'])} prefill, {len(fit['decode'])} decode "
                  f"partitions{fz}) and {d / GUARD} ({len(guard['cells'])} partitions)")
            return 0
        if a.cmd == "add-fused":
            d = resolve_table(a.dir)
            for line in add_fused(d, a.files):
                print(line)
            print(f"check it: python -m sglang_mux.estimator check {d}")
            return 0
        if a.cmd == "check":
            return 0 if check_table(resolve_table(a.dir), progress=_progress(time.monotonic())) else 1
        # The CLI speaks per request (like the table and `dispatch plan`); predict() takes the sum.
        if a.decode_max_reused is not None and a.decode_max_reused < a.decode_reused:
            p.error("--decode-max-reused is the longest context: it cannot be below --decode-reused")
        mx = a.decode_reused if a.decode_max_reused is None else a.decode_max_reused
        print(json.dumps(predict(a.dir, a.prefill_new, a.prefill_reused, a.decode_bs,
                                 a.decode_reused * a.decode_bs, a.decode_sms, mx), indent=1))
        return 0
    except (TableError, UnprofiledPartition) as e:
        print("error: " + " ".join(str(e).split()), file=sys.stderr)
        return 2


if __name__ == "__main__":
    from . import cli

    cli.run(main)
