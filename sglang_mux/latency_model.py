"""Solo-run latency regressors (MuxWise §3.3.2, Equations 1 and 2), one fit per SM partition.

The paper's equations are the base,

    prefill (Eq. 1):  T = θ1·Σn_i² + θ2·Σn_i·r_i + θ3·Σn_i + θ4
    decode  (Eq. 2):  T = θ1·Σr_i  + θ2·bs       + θ3

extended by terms for what the measured table shows and the equations cannot express:

    prefill:  T = θ1·Σn² + θ2·W·Σn·r + θ5·W·Σn·r·[r > r0] + θ7·C + max(L, lin(m))
              lin(m) = θ3·g·m + θ4 + θ8·(m − m_k)+ + θ9·(m − m_k2)+ + θ10·G_S(m),   m = max(Σn, m_min)
              C = the K = min(bs, ⌈bs·H/S⌉) longest prefixes with r ≤ r0 (the cold waves)
    decode:   T = max(θ1·Σr, β·K) + θ2·bs + θ3,   K = the keys one of k·S block slots sweeps
              until the kernel's last block ends (``key_waves``; r_max with k = 0)

n_i = new tokens, r_i = reused (cached) tokens of request i; T in ms, whole model; G_S(m) =
the measured projections' time of an m-token batch on S SMs (the table's GEMM curve). With
W = 1, θ5 = θ7 = θ8 = θ9 = θ10 = 0, L = 0, g = 1, m_min = 0 and β = 0 the extended model is
exactly Eq. 1 / Eq. 2 (the fit falls back to that when the data show none of the effects; θ
tuples of the paper's width are read that way). With padded query blocks (SGLang's triton extend) each
request's n_i in the attention terms counts the longest request's query blocks (below).

Why each addition (measured on the H200 table contention_tables/llama-3.1-8b__nvidia-h200__triton,
SGLang's triton attention backend; "wave" = one round of thread blocks, one per SM):

- Prefill, wave quantization of the extend-attention grid (factor W, hyper-parameter τ).
  The triton extend kernel launches one block per (request, head, 128-query block) and runs
  one block per SM, so the attention over the prefix costs ⌈blocks/S⌉ waves of one block's
  sweep over its r keys — independent of how many SMs are busy in the last wave. The table
  shows it exactly: a 2048-token query over 32K cached tokens costs 68 ms per wave on every
  partition (2037 ms = 26 waves on 20 SMs, 317 ms = 4 waves on 132 SMs); n=512, r=32K is
  155 ms on 68..116 SMs alike (2 waves) and 80 ms on 132 SMs (1 wave); n=128 over 32K costs
  ~3.6x what Σn·r predicts (one partial wave). W·Σn·r replaces Σn·r by the token count of
  the waves actually run: W = ⌈Σ⌈n_i/B⌉·B / (τ·S)⌉·τ·S / Σn (B = 128-token query blocks,
  τ = query tokens per SM per wave: 4 = 128 rows / 32 heads for Llama-3.1-8B). That is
  the uniform batches the table holds; a mixed batch is packed longest prefix first into
  waves of τ·S query tokens, each wave as long as its longest block (``_waves``), which
  equals W·Σn·r on a uniform batch. Averaging r over a mixed batch instead let a short
  request with no prefix, added to a short query over a 53K prefix, lower the estimate by
  a third; packed waves never lower it when a request is added. τ is
  chosen by the fit from {off, 1, 2, 4, 8, 16} (off = plain Σn·r, as for a backend without
  this quantization).
- Prefill, L2 spill (θ5 = κ·θ2, knee r0). The cost per (query, key) pair rises with r:
  2.8 ns at r = 8192 vs 4.0 ns at r = 32768 for n = 2048..32768 (12.2 vs 68 ms per wave,
  5.6x for 4x the keys). A layer's prefix KV is r × 2·kv_heads·head_dim·2 bytes (4 KiB per
  token here): 32 MiB at r = 8K stays in the 50 MiB L2 across waves, 128 MiB at r = 32K is
  re-read from HBM by every wave. The rise is a cliff, not a ramp: on 116 SMs the prefix
  attention of a 2048-token query costs 7.7 µs per cached key (whole model) at r = 8K and
  10.0, 10.3, 10.1 at 16K, 32K, 64K — once the prefix does not fit, every wave streams all
  of it and evicts what the next wave needs (LRU), so ALL its keys cost the spilled rate,
  not only those past the knee. A request whose prefix exceeds r0 = L2 bytes / KV bytes per
  token-layer (12800 for this model on H100/H200) pays (1+κ)x on all its pairs. (Format 2 charged only the keys
  past r0: r = 16K rows came out 8-11% low on every partition; the cliff lowers every
  partition's mean held-out error, by 0.3-1.2 points.) κ is a property of the kernel and
  the memory system, not of the partition (the per-wave times above are the same on every
  partition), so it is pooled; a free θ5 per partition overfitted the few r = 32K rows of a
  partition. r0 is computed from the GPU and the model, not fitted: the table's r ∈ {0, 2K,
  8K, 16K, 32K, 64K} only says the cliff lies in (8K, 16K].
- Prefill, cold prefix reads (θ7·C: the prefixes that fit in L2, all of them when there is no
  spill term, one per cold wave, see below). The first wave over a prefix reads its KV from
  HBM, the later waves find it in L2. The GPU-time H200 table shows it: one 128-query block per head over 8K
  cached tokens costs ~17 ms (whole model) in its single wave on every partition from 68 to
  132 SMs (n = 128: 24.5-24.8 ms against 7.6-7.8 ms without the prefix), while 4 waves over the
  same prefix cost ~50 ms on 132 SMs (n = 2048: 97.7 vs 47.6 ms), 12.5 ms per wave. A spilled
  prefix streams from HBM in every wave (κ), so it gets no θ7. Without θ7 (in-sample) the
  r = 8K rows of n ≥ 2048 came out 6-12 % high on every partition and n = 128 over 8K up to
  10 % low; with it 5 of 8 H200 partitions meet the held-out bounds (format 5). θ7 is pooled
  over partitions (format 6): fitted per partition it came out 0.52-0.57 µs per cached token
  (whole model) on all eight H200 partitions and 0.56-0.62 on the H100's, a property of the
  memory system; per partition it was pinned by one or two rows, and a fold that held them
  out mispredicted n = 128 over 8K by up to 14 %. The fit takes the median of the
  per-partition values times COLD_GRID, then one joint NNLS (``_polish``) makes it exact.
- Prefill, token knees (θ8·(m − m_k)+ + θ9·(m − m_k2)+, knees pooled, format 6). The
  token-linear work is convex in the batch's tokens m: on the full H200 an added token costs
  13 µs from 128 to 256 tokens, 16 µs from 256 to 512 and 19-21 µs from 1024 on (attention
  taken out at the fitted rate): the projections go from reading the weights to computing.
  One straight line was 7-9 % off at n = 128, 512 and 4 × 2048 in-sample, 13 % on the H100.
  Non-negative θ8, θ9 add slope past each knee, so the line can only bend upwards;
  (m_k, m_k2) is chosen by the fit from GEMM_KNEE_GRID: (512, 1024) on the H200 table,
  (512, 2048) on the H100's.
- Prefill, the measured GEMM curve (θ10·G_S(m), θ10 pooled, format 7). cuBLAS picks the
  projections' kernel by the batch's token count m, and some choices are far off their
  neighbours': on every partition of both GPUs the four projections of a 448-token batch take
  1.35-1.51x a 512-token batch's time, and on 20 SMs 96, 160 and 320 tokens take 1.4-2.2x their
  neighbours (``profiling.gemm_curve``; the whole prefill follows: 448 tokens took 1.41x 512 on
  84 SMs of the H100). The session-7 line (knees, GEMM waves) missed those rows held out by
  27-42 % on both tables. G_S is the table's gemm_curve.csv (70 token counts from 32 to 32768,
  every 32 up to 1024), linear between its points; θ10 is the model-to-microbenchmark ratio,
  pooled from GEMM_SCALE_GRID and polished by the joint NNLS (0.875 on the H200 table, 0.956 on
  the H100's); θ3·m keeps the element-wise work and the knees and waves what is left. With a
  curve every batch size is fitted (m_min = 0), and no launch floor is offered (a table with a
  curve times the GPU alone). Between the curve's points cuBLAS may jump: ``check`` prints how
  far each point is from its neighbours' interpolation (median 3 %, up to 80 %).
- Prefill, smallest batch m_min = MIN_BATCH_TOKENS (128), only without a GEMM curve. Below one
  128-row tile the measured cost follows no line: 64 new tokens took 99 % of a 128-token
  prefill's time on 20 SMs of the H200 but 70 % on the H100, 74-93 % elsewhere (the curve
  shows why: cuBLAS's kernels at 64 tokens). Batches below m_min are charged m_min tokens of
  token-linear work, an upper bound; the fit leaves their rows out and the check reports them
  as bounds.
- Prefill, cold waves (C, format 7). The extend grid is (request, head, query block) with the
  request fastest and one block per SM per wave, so the first query block of every request and
  head runs first, in ⌈bs·H/S⌉ waves (H = query heads, 32 here), and requests whose blocks
  share a wave read their prefixes from HBM at once. Charging every request's cold read (Σr)
  put 16 requests of 512 tokens over 2048 cached ones 7 % over on 132 SMs (11 % held out on the
  H100); charging K = min(bs, ⌈bs·H/S⌉) cold reads (the K longest resident prefixes of a mixed
  batch) fits them and lowered the worst held-out prefill error to 6.3 % on both tables.
- Prefill, padded query blocks (format 7, ``padded_query_blocks``). SGLang's triton extend
  kernel launches ⌈longest request's n / 128⌉ query blocks for EVERY request and does not skip
  the ones past a request's own tokens: each such block sweeps its request's whole prefix and
  its new tokens with no valid row. An 84-token request over an 8227-token prefix batched with a
  2474-token one costs as if it had 2560 new tokens (725.7 ms measured on 20 SMs of the H200;
  734.5 ms estimated with the padded blocks, 361 ms without). Uniform batches (all table rows) have no such
  blocks, so this is not fitted but set for tables profiled with the triton backend; on 120
  measured mixed batches (bench/results/prefill_mixed_h200.json) it takes the estimate from 19 %
  low on average (P90 35 %) to a median error of 1.9 % (P90 4.7 %).
- Prefill, launch floor L (pooled over partitions). Small prefills are bound by the host
  launching ~10 kernels per layer, not by the GPU: n=128, r=0 takes 11.2-13.7 ms on every
  partition from 36 to 132 SMs, and n=512 takes 12.4 ms on 132 SMs (n=2048: 49.8 ms). The
  floor competes with the token-linear work (GEMMs, element-wise), not with attention,
  which adds on top: n=128 over 8K cached tokens costs 13.7 + 11 ms on 116 SMs. The host
  cost does not depend on the SM count, so one L serves every partition; it is chosen by
  the fit (0 = no floor). Per partition it would be unidentifiable: only one or two rows
  per partition sit on it. L is the HOST's, and it moves: on the H100 table's machine the
  same cells took 14-20 ms, with single cells bimodal between ~15 and ~34 ms; measured
  again on a second H100 machine they took 25-32 ms (bench/results/
  h100_launch_floor_two_hosts.json). No fit of one table predicts these rows within 10%.
  At run time the estimator's online prefill correction (a per-partition EWMA of measured
  over estimated) follows a host that is slower across the board, not one whose floor
  alone moved; a floor calibrated at start-up on the serving host would. Since then the
  profiler holds the host ahead and times the GPU alone (profiling/harness.py
  ``prefill_samples``): the tables' short rows are GPU times, steady to ~0.3 % (n = 128 on
  the full H200: 5.9 ms), and the host's launch time is the estimator's online term
  (estimator docstring). A table marked so (meta.json ``profiler.prefill_timing = "gpu"``) is
  fitted without L: the floor was the host's (``fit_prefill_frame(launch_floor=False)``).
- Prefill, GEMM waves (factor g; hyper-parameters m_lo, m_hi; D = the GPU's SM count). The
  projections of a small batch are tiled for the WHOLE GPU, so on an S-SM partition their
  work takes up to ⌈D/S⌉ rounds instead of D/S. The table shows it on every partition: a
  512-token prefill takes 17.5-19.4 ms on 68..116 SMs (2 rounds of ~8.8 ms) and 26.4, 36.0,
  61.7 ms on 52, 36, 20 SMs (3, 4, 7 rounds; the full GPU runs it on the launch floor).
  ``profiling.gemm_waves`` times the four projections alone (bench/results/gemm_waves_h200.json,
  _h100): at 512 tokens 116 SMs take 1.52x the full GPU's time (1/S scaling would be 1.14x),
  at 8192 tokens 1.17x (H100: 1.53x, 1.23x); cuBLAS's SM-count target (torch's SM carveout) does
  not change them, so the engine cannot simply ask for partition-sized grids. Larger batches
  get grids of many tiles, which fill any partition, so the effect fades with the batch's
  token count (the GEMMs' M: four 512-token requests are a 2048-token GEMM). The term is
  θ3·g·Σn with g = 1 + (⌈D/S⌉·S/D − 1)·φ(Σn): φ = 1 up to m_lo batch tokens, 0 from m_hi,
  log-linear between (``gemm_share``); (m_lo, m_hi) is chosen by the fit from GEMM_WAVES_GRID
  (off included): (2048, 65536) on the H200 table. There it takes the worst held-out error on
  116 SMs from 24.9% to 10.5% (mean 5.1% to 3.2%) and on 52 SMs from 17.4% to 6.3%.
- Decode, occupancy floor β·K (β pooled over partitions, k measured). An iteration that does
  not saturate bandwidth lasts β·K, K the keys one SM sweeps until the kernel's last block
  ends (``key_waves``): for SGLang's triton kernel, blocks per (request, head group, KV split),
  splits sized for the whole GPU, k blocks per SM at once (k = 6, measured by
  ``profiling.decode_kernel`` into meta.json; a table without it lets the fit choose k from
  {off, 1 .. 16}) and the short last splits scheduled after the full ones: ``triton_kernels``,
  where the rule and the rows that show it are. bs=1, r=130K is 64 blocks of 16,288 keys, one
  wave on 16 SMs and on 132 (60 and 54 ms); bs=2 is two waves on 16 SMs (106 ms) and still one
  on 112 (51 ms). The per-block rate does not depend on the partition, so β is one pooled
  value. θ1·Σr (bandwidth) takes over once the waves fill the memory system. Counting whole
  waves of ⌈r / splits⌉ keys instead of the short last splits (format 7) missed the H200 triton
  table's rows held out by 10.5 %. With k = off the floor is β·r_max (one wave of the longest
  request). A mixed batch is charged as ``triton_kernels`` says, an upper bound; it needs
  r_max, the longest context in the batch; callers that only know Σr get the uniform-batch
  value Σr/bs.

FA3 (tables with ``attention_backend`` fa3; ``PrefillHyper.split_kv_device_sms``, format 9). FA3's
prefill grid is not triton's: it packs the query heads of a KV head into a tile (B = 128 / g
tokens, g = H / H_kv) and splits the keys of a batch with too few tiles to fill the whole GPU,
sized for the device's 132 SMs whatever the partition (``fa3_kernels``, where the rule and
the rows that show it are). Its attention terms are the same W·Σn·r form with s× the blocks,
each sweeping r / s keys: ⌈s·Σ⌈n/B⌉·B / (τ·S)⌉·τ·S·r / s, τ = 128 / H = 4 (one tile's tokens
per SM, fixed, not chosen), and triton's padded query blocks do not apply. Everything else
(θ fits, GEMM curve, knees, cold reads) is shared. With the triton grid the H100 FA3 table's
prefill missed rows held out by 12.7 / 14.3 / 28.2 % on 100 / 116 / 132 SMs (a short query over
32K or 64K cached tokens: split 4 ways, one wave on 132 SMs, two on 116); with FA3's grid every
partition of both FA3 tables passes (max 2.0-8.8 %, mean 0.7-2.3 %). FA3's decode has its own
grid too (``DecodeHyper.fa3``, ``fa3_kernels.decode_keys``): one tile per request and KV head,
split by the same heuristic for the whole GPU, and memory-bound blocks that share an SM (a
second one costs γ of a block) rather than wait for a wave. Triton's grid (split tails, k
blocks per SM) passed the H100 tables with k = 3 and 16 but missed the H200's rows held out by
15.9 / 27.1 / 17.2 % on 96 / 112 / 132 SMs. γ is each partition's own (θ5), β pooled. The
floor β·K is linear in β and βγ: β·K0 + δ·X, K0 the busiest SM's keys with one block per SM and
X what the others add (γ = 0 and 1); for each β of the grid, δ is fitted per partition with the
other θs, 0 ≤ δ ≤ β (a second block never costs more than a block; scipy's lsq_linear), and
γ = δ/β. On the three FA3 tables γ rises with the partition below the full GPU, 0.44-0.82 (H100
Llama), 0.78-1.00 (H200), 0.49-0.93 (H100 Qwen); on 132 SMs a step holds one block per SM, which
leaves it 0. Every partition passes held out (112 SMs: 6.5 / 8.4 / 5.3 %).
One γ for all partitions (0.38 / 0.62 / 0.50) missed the H200's 112 SMs by 10.2 % held out
(repeat grids on the same GPU within 0.7 %: the model, bench/results/fa3_h200_s23/). γ chosen per
partition from a grid at a β chosen for one γ passed too but was biased: rows made with 0.5 and
0.75 came back 0.38 and 0.62. δ unbounded gave γs of 0 to 5 on the H100 tables
(bench/results/fa3_decode_delta_s24/). β stays the refined grid's: δ ≤ β ties the partitions to
it, which the joint polish below cannot hold.

Fitting. Non-negative least squares (scipy's NNLS, what sklearn's LinearRegression(positive=
True) calls) on *relative* error (rows weighted by 1/latency) because the accuracy target is
relative and latencies span three decades; columns are rescaled to max 1 (conditioning).
Per partition the θs are fitted on that partition's rows only. The few hyper-parameters (τ,
κ, L, (m_lo, m_hi), (m_k, m_k2), θ7 and θ10 for prefill, β for decode) are shared by all
partitions and chosen on the training rows of all partitions by the acceptance criterion
itself, J = max/10% + mean/3% of the relative errors (grids; coordinate search over (τ, κ),
L, (m_lo, m_hi), (m_k, m_k2), θ7 and θ10; β for each k); max(·) terms are fitted by enumerating
which rows sit on the floor (on the side of the smallest Σn, resp. the smallest Σr/r_max),
and L, θ7, θ10 and β are then refined by one joint NNLS over all partitions (kept if J
improves). Profiled batches are uniform, so a CSV row's per-request n, r and r_max are Σn/bs,
Σn·r/Σn, Σr/bs. On the H200 table (format 8, GPU-time rows, GEMM curve) the fit picks τ = 4
(the kernel's 128 rows / 32 heads), κ = 0.375, no L, GEMM waves (1024, 4096), knees (1024,
2048), θ7 = 0.54 µs per cached token, θ10 = 0.875, and for decode (k = 6 measured) β ≈ 3 µs
per key-wave token.
``heldout_errors`` gives the check's cross-validated errors: a partition's held-out rows
never influence the fit (its θs nor the pooled hyper-parameters) that predicts them.

Trade-off of pooling. Only the hyper-parameters, which stand for partition-independent
physics (kernel shape, memory system, host launch cost, per-block latency), are pooled;
θ1..θ4 stay one fit per partition (4 x 8 + 3 prefill parameters on the H200 table). Fully
pooled coefficients (θ = a + b/SMs, 11 prefill parameters) were tried: a better worst
held-out error while other partitions keep the held-out cell (23% vs 30%), a worse one when
the whole cell is held out everywhere (39% vs 29%), and a bias wherever a partition departs
from 1/SMs scaling (the 132-SM full GPU runs n=512 prefills 30% faster than 116 SMs).

Prediction never touches sklearn/numpy: coefficients are plain floats and a prediction is a
loop over the requests plus a handful of multiplications (the dispatcher calls it many
times per scheduling step; budget ≤ 20 µs).

Unprofiled partitions (``s`` SMs, not in the table):
  - between two profiled partitions lo < s < hi: the coefficients (L and β included) are
    interpolated linearly in 1/SMs (exact for work that scales perfectly with SMs,
    ``T ∝ 1/s``; a convex mix of non-negative θs stays non-negative), but FA3's decode γ,
    a share and no rate, is the larger of the two; the wave counts (attention, GEMM, decode)
    use s;
  - above the largest profiled partition: that partition's coefficients are used — a
    conservative overestimate, since more SMs do not make a kernel slower;
  - below the smallest profiled partition: :class:`UnprofiledPartition` (a ValueError) —
    extrapolating to fewer SMs would underestimate, which breaks SLO guarantees.
"""

from __future__ import annotations

import bisect
import heapq
import logging
import math
from dataclasses import asdict, dataclass, replace
from typing import Iterable, Mapping, Sequence

from .fa3_kernels import Fa3Grid, decode_keys as fa3_decode_keys
from .triton_kernels import MIN_BLOCK_KV, decode_head_groups, decode_keys as triton_decode_keys
from .gemm_curve import GemmCurves

logger = logging.getLogger(__name__)

# 10: FA3's decode γ per partition (the decode θ's fifth value; 9 pooled it in decode_hyper);
# 9: + FA3's prefill grid (PrefillHyper.split_kv_device_sms, kv_heads); 8: + decode split tails
# (DecodeHyper.min_block_kv). Only 8 (the triton tables) and 10 are read; earlier formats added, in
# order: the measured GEMM curve (7), token knees and the smallest batch (6), cold prefix reads
# (5), GEMM waves (4).
FORMAT = 10
# θ order: the paper's four (three) first, then the extensions (see the module docstring).
PREFILL_FEATURES = ("sum_new_sq", "sum_new_reused_waves", "sum_new", "one", "sum_new_spill_waves", "launch_floor",
                    "sum_reused_resident", "sum_new_past_knee", "sum_new_past_knee2", "gemm_curve_ms")
# floor: β·K, see DecodeHyper; fa3_block_share: FA3's γ (0 for triton)
DECODE_FEATURES = ("sum_reused", "bs", "one", "occupancy_floor", "fa3_block_share")
PAPER_PREFILL, PAPER_DECODE = 4, 3
PREFILL_WIDTH, DECODE_WIDTH = len(PREFILL_FEATURES), len(DECODE_FEATURES)

# Hyper-parameter grids (searched on the training rows of all partitions).
WAVE_TOKENS_GRID = (0, 1, 2, 4, 8, 16)  # τ; 0 = no wave quantization
SPILL_GRID = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0, 1.25, 1.5, 2.0)  # κ; 0 = no spill term
FLOOR_GRID = tuple(0.5 + 0.05 * i for i in range(16))  # L / (fastest training row); and 0
BETA_COARSE, BETA_FINE = 22, 15  # geometric grid points of β (coarse over 3 decades, then ±39%)
DECODE_BLOCKS_GRID = (0, 1, 2, 3, 4, 5, 6, 8, 12, 16)  # k: blocks per SM per decode wave; 0 = off
# (m_lo, m_hi): batch tokens up to which the token-linear work runs in ⌈D/S⌉ waves, and from
# which it scales as 1/S (log-linear between; m_lo = m_hi: a step); (0, 0) = off.
GEMM_WAVES_GRID = ((0, 0),) + tuple((lo, hi) for lo in (256, 512, 1024, 2048)
                                    for hi in (lo, 4096, 16384, 65536, 262144) if hi >= lo)
# (m_k, m_k2): batch tokens past which the token-linear work gets dearer per token (θ8, θ9
# charge the tokens past each); 0 = off.
GEMM_KNEE_GRID = ((0, 0),) + tuple((k, 0) for k in (128, 256, 512, 1024, 2048)) + tuple(
    (a, b) for a in (128, 256, 512, 1024) for b in (512, 1024, 2048, 4096) if b > a)
# Pooled GEMM-curve scale θ10 (model's projections / the curve's microbenchmark).
GEMM_SCALE_GRID = tuple(round(0.75 + 0.025 * i, 3) for i in range(15))
# Pooled cold-read cost θ7: the median of the per-partition fits times these factors.
COLD_GRID = tuple(0.6 + 0.05 * i for i in range(17))
BLOCK_TOKENS = 128  # query rows per extend-attention block (SGLang triton, sm90)
# Batches of fewer tokens have their token-linear work charged as this many (an upper bound:
# 64-token prefills took 70-99 % of a 128-token one's time, in no pattern a fit could follow);
# the fit leaves their rows out, the check reports them as bounds.
MIN_BATCH_TOKENS = 128
# Selection criterion J = max/MAX_REL + mean/MEAN_REL: the estimator's accuracy bounds.
MAX_REL, MEAN_REL = 0.10, 0.03
_TIE = 1e-9

# L2 cache per GPU (bytes) for the spill knee; unknown GPUs get DEFAULT_L2_BYTES.
L2_BYTES = {"H100": 50 << 20, "H200": 50 << 20, "H800": 50 << 20, "GH200": 50 << 20, "A100": 40 << 20,
            "A800": 40 << 20}
DEFAULT_L2_BYTES = 50 << 20


@dataclass(frozen=True)
class PrefillReq:
    n: int  # new tokens
    r: int = 0  # reused (cached) tokens


@dataclass(frozen=True)
class PrefillHyper:
    """Prefill hyper-parameters shared by all partitions (fit.json ``prefill_hyper``)."""

    wave_tokens_per_sm: int = 0  # τ: query tokens per SM per attention wave; 0 = off
    block_tokens: int = BLOCK_TOKENS  # B: queries are rounded up to blocks of this many
    l2_knee_tokens: int = 0  # r0: cached tokens whose KV fits in L2; 0 = no spill term
    gemm_device_sms: int = 0  # D: the whole GPU's SMs, which small projections are tiled for; 0 = off
    gemm_waves_lo: int = 0  # m_lo: batch tokens up to which token-linear work runs in ⌈D/S⌉ waves
    gemm_waves_hi: int = 0  # m_hi: batch tokens from which it scales as 1/S
    gemm_knee_tokens: int = 0  # m_k: batch tokens past which the token-linear work costs θ8 more per token; 0 = off
    gemm_knee2_tokens: int = 0  # m_k2 > m_k: a second such knee (θ9); 0 = off
    min_batch_tokens: int = 0  # token-linear work of a smaller batch is charged as this many tokens; 0 = off
    cold_head_blocks: int = 0  # H: extend-attention blocks per request and query block (query heads); 0 = off
    padded_query_blocks: int = 0  # 1: every request runs the longest request's query blocks (triton extend grid)
    split_kv_device_sms: int = 0  # D: FA3's grid (packed GQA tiles, split-KV sized for D SMs); 0 = off (triton)
    kv_heads: int = 0  # H_kv: KV heads, FA3's tiles per request and query block

    def __post_init__(self):
        for k, v in asdict(self).items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"prefill hyper-parameter {k} must be a non-negative int, got {v!r}")
        if self.block_tokens < 1:
            raise ValueError("prefill hyper-parameter block_tokens must be >= 1")
        if self.gemm_waves_lo and (not self.gemm_device_sms or self.gemm_waves_hi < self.gemm_waves_lo):
            raise ValueError("prefill gemm_waves_lo > 0 needs gemm_device_sms > 0 and gemm_waves_hi >= gemm_waves_lo")
        if self.gemm_knee2_tokens and not 0 < self.gemm_knee_tokens < self.gemm_knee2_tokens:
            raise ValueError("prefill gemm_knee2_tokens > 0 needs 0 < gemm_knee_tokens < gemm_knee2_tokens")
        if self.split_kv_device_sms and not (self.kv_heads and self.cold_head_blocks and not self.padded_query_blocks):
            raise ValueError("prefill split_kv_device_sms > 0 (FA3) needs kv_heads > 0, cold_head_blocks > 0 "
                             "(the query heads) and no padded_query_blocks (triton's)")

    @property
    def fa3(self) -> Fa3Grid | None:
        """FA3's prefill grid (fa3_kernels), None for the triton grid."""
        if not self.split_kv_device_sms:
            return None
        return Fa3Grid(self.cold_head_blocks, self.kv_heads, self.split_kv_device_sms)

    @property
    def gemm_waves(self) -> tuple[int, int]:
        return (self.gemm_waves_lo, self.gemm_waves_hi) if self.gemm_device_sms else (0, 0)


@dataclass(frozen=True)
class DecodeHyper:
    """Decode hyper-parameters (fit.json ``decode_hyper``): SGLang's triton decode grid, or FA3's.

    Triton: ``blocks_per_sm`` (k) is the kernel's measured occupancy (meta.json) or, without
    it, fitted; the others describe the kernel and come from the model and the GPU
    (``decode_kernel``, ``triton_kernels``). k = 0: no wave count, the floor is β·r_max."""

    blocks_per_sm: int = 0  # k: blocks per SM per wave; 0 = off
    head_groups: int = 0  # G: blocks per request and KV split
    max_kv_splits: int = 8  # SGLang's --triton-attention-num-kv-splits (default 8)
    device_sms: int = 0  # the whole GPU's SM count, which SGLang sizes the KV splits by
    min_block_kv: int = 0  # the stage-1 kernel's MIN_BLOCK_KV (32 in SGLang 0.5.16)
    # FA3's decode grid instead (fa3_kernels.decode_keys): head_groups = KV heads, and an SM
    # holding m blocks takes 1 + γ(m − 1) blocks' time, γ fitted per partition (θ5, δ/β)
    fa3: int = 0  # 1 = FA3's grid

    def __post_init__(self):
        for k, v in asdict(self).items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"decode hyper-parameter {k} must be a non-negative int, got {v!r}")
        if self.blocks_per_sm and not self.usable:
            raise ValueError("decode blocks_per_sm > 0 needs head_groups, device_sms and max_kv_splits > 0")
        if self.blocks_per_sm and not self.fa3 and not self.min_block_kv:
            raise ValueError("decode blocks_per_sm > 0 needs min_block_kv (the kernel's split rounding, 32 in "
                             "SGLang 0.5.16); refit the table: python -m sglang_mux.estimator fit DIR")

    @property
    def usable(self) -> bool:
        """Whether the kernel is described well enough to count waves."""
        return bool(self.head_groups and self.device_sms and self.max_kv_splits)

    @property
    def waves(self) -> bool:
        """Whether the floor counts the kernel's blocks (else it is β·r_max)."""
        return self.blocks_per_sm > 0 or bool(self.fa3)

    def with_choice(self, k: int) -> "DecodeHyper":
        """The kernel with the fit's pooled choice of k blocks per SM (triton). FA3's choice, γ,
        is per partition and goes into θ, so its kernel is returned as it is."""
        return self if self.fa3 else replace(self, blocks_per_sm=int(k))


def decode_kernel(num_heads: int, num_kv_heads: int, device_sms: int, max_kv_splits: int = 8,
                  min_block_kv: int = MIN_BLOCK_KV) -> DecodeHyper:
    """The triton decode kernel's description (k = 0, for the fit to choose) of a model on a GPU
    (``triton_kernels``)."""
    return DecodeHyper(0, decode_head_groups(num_heads, num_kv_heads), int(max_kv_splits), int(device_sms),
                       int(min_block_kv))


def key_waves(h: DecodeHyper, sms: int, bs: int, sum_reused: float, max_reused: float | None = None,
              gamma: float = 0.0) -> float:
    """K: the keys one SM sweeps until the step's last block ends, of the decode grid ``h``
    describes: FA3's (``fa3_kernels.decode_keys`` of the longest context, with the partition's
    ``gamma``, θ5) or triton's (``triton_kernels.decode_keys``). ``max_reused`` None: a uniform
    batch of Σr/bs."""
    r = max(1, math.ceil(sum_reused / bs if max_reused is None else max_reused))
    if h.fa3:  # FA3 sizes a batch by its longest context: exact for a uniform batch, else a bound
        return fa3_decode_keys(h.head_groups, h.device_sms, sms, bs, r + 1, gamma)
    uniform = max_reused is None or bs * max_reused <= sum_reused * (1 + 1e-9)
    return triton_decode_keys(h.head_groups, h.max_kv_splits, h.device_sms, h.min_block_kv, h.blocks_per_sm,
                              sms, bs, sum_reused, r, uniform)


def gemm_excess(device_sms: int, sms: int) -> float:
    """Q − 1 = ⌈D/S⌉·S/D − 1: extra work of a D-block grid run in waves on S SMs (0 if S ≥ D)."""
    if not device_sms or sms >= device_sms:
        return 0.0
    return -(-device_sms // sms) * sms / device_sms - 1.0


def gemm_share(tokens: float, lo: int, hi: int) -> float:
    """φ: the share of the token-linear work that runs in whole-GPU grids at ``tokens`` batch
    tokens: 1 up to m_lo, 0 from m_hi, log-linear between (a step if m_lo = m_hi)."""
    if not lo or tokens <= lo:
        return 1.0 if lo else 0.0
    if tokens >= hi:
        return 0.0
    return math.log(hi / tokens) / math.log(hi / lo)


class UnprofiledPartition(ValueError):
    """Prediction asked for an SM count below every profiled partition."""


def cold_waves(bs: int, heads: int, sms: int) -> int:
    """K = min(bs, ⌈bs·H/S⌉): waves that read prefixes for the first time. The extend grid is
    (request, head, query block) with the request fastest, one block per SM per wave, so the
    first query block of every request and head comes first: ⌈bs·H/S⌉ waves, and requests
    whose blocks share a wave read their prefixes at once (module docstring). H = 0: bs."""
    if not heads:
        return bs
    return min(bs, -(-bs * heads // sms))


def prefill_features(reqs: Iterable[PrefillReq]) -> tuple[int, int, int]:
    """(Σn², Σn·r, Σn) of a prefill batch (the paper's Eq. 1 features)."""
    sq = nr = n = 0
    for q in reqs:
        sq += q.n * q.n
        nr += q.n * q.r
        n += q.n
    return sq, nr, n


def l2_knee_tokens(gpu_name: str, num_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> int:
    """Cached tokens whose per-layer K and V fit in the GPU's L2 (the spill knee r0)."""
    name = str(gpu_name).upper()
    l2 = next((v for k, v in sorted(L2_BYTES.items(), key=lambda kv: -len(kv[0])) if k in name),
              DEFAULT_L2_BYTES)
    return int(l2 // (2 * int(num_kv_heads) * int(head_dim) * int(dtype_bytes)))


# ----------------------------------------------------------------------------- fitting helpers

def fit_nonneg(X, y, relative: bool = True, target=None) -> tuple[float, ...]:
    """Non-negative least squares of ``target`` ≈ X·θ (X includes the ones column).

    Relative error: rows are weighted by 1/y (``target`` defaults to y; a floored fit passes
    y minus the known floor part as target but keeps the weights of the measured y).
    Columns are rescaled to max 1 first: Σn² reaches 1e10 while the ones column is 1, and the
    NNLS solver is badly conditioned on such ranges. Scaling by positives keeps θ ≥ 0.
    """
    import numpy as np

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    t = y if target is None else np.asarray(target, dtype=float)
    return tuple(float(c) for c in _nnls(X, t, 1.0 / y if relative else np.ones_like(y)))


def _nnls(X, t, w, last_max: float | None = None):
    """Non-negative weighted least squares; ``last_max``: the last coefficient at most that."""
    import numpy as np
    from scipy.optimize import lsq_linear, nnls

    scale = np.abs(X).max(axis=0) if len(X) else np.ones(X.shape[1])
    scale[scale == 0] = 1.0
    A = (X / scale) * w[:, None]
    if last_max is not None:
        hi = np.full(X.shape[1], np.inf)
        hi[-1] = last_max * scale[-1]
        return np.maximum(lsq_linear(A, t * w, bounds=(np.zeros(X.shape[1]), hi)).x / scale, 0.0)
    try:
        c, _ = nnls(A, t * w, maxiter=50 * max(1, A.shape[1]))
    except RuntimeError:  # pragma: no cover - pathological inputs only
        from sklearn.linear_model import LinearRegression
        c = LinearRegression(positive=True, fit_intercept=False).fit(A, t * w).coef_
    return np.maximum(c / scale, 0.0)


def _criterion(pred, y) -> float:
    import numpy as np

    return _errors_j(np.abs(pred / y - 1.0))


def _errors_j(e) -> float:
    """J of relative errors ``e``."""
    return float(e.max() / MAX_REL + e.mean() / MEAN_REL) if len(e) else 0.0


class _PrefillRows:
    """Design of one partition's solo_prefill rows (uniform batches) for any τ."""

    def __init__(self, df, sms: int, knee: int, block: int = BLOCK_TOKENS, device_sms: int = 0,
                 min_tokens: int = 0, curve: GemmCurves | None = None, heads: int = 0,
                 fa3: Fa3Grid | None = None):
        import numpy as np

        self.sms = int(sms)
        self.q = gemm_excess(int(device_sms), self.sms)
        self.y = df["latency_ms"].to_numpy(dtype=float)
        bs = df["bs"].to_numpy(dtype=float)
        self.n_sum = df["sum_new"].to_numpy(dtype=float)
        # the tokens the token-linear work is charged for: at least ``min_tokens`` (min_batch_tokens)
        self.n_lin = np.maximum(self.n_sum, float(min_tokens)) if min_tokens else self.n_sum
        # the projections' measured time at the batch's tokens (zeros: no curve, θ10 unused)
        self.gm = np.array(curve.column(self.sms, self.n_lin)) if curve is not None else np.zeros(len(self.y))
        self.sq = df["sum_new_sq"].to_numpy(dtype=float)
        self.nr = df["sum_new_reused"].to_numpy(dtype=float)
        r = np.where(self.n_sum > 0, self.nr / np.maximum(self.n_sum, 1.0), 0.0)
        self.r = r
        self.h = np.where(r > knee, r, 0.0) if knee > 0 else np.zeros_like(r)
        # the cold prefix reads of the uniform batch: r in each of its cold waves (Σr_i if heads = 0)
        self.sr = np.array([cold_waves(int(b), heads, self.sms) for b in bs], dtype=float) * r
        self.sr_res = np.where(r > knee, 0.0, self.sr) if knee > 0 else self.sr
        self.nh = self.n_sum * self.h
        if fa3 is not None:  # FA3: packed-GQA tiles, keys split to fill the whole GPU (fa3_kernels)
            block = fa3.block_tokens
            n = self.n_sum / bs
            self.s = np.array([fa3.splits(int(b), int(q), int(q + rr)) for b, q, rr in zip(bs, n, r)], dtype=float)
        else:
            self.s = None
        self.block_tok = bs * np.ceil(self.n_sum / bs / block) * block  # query tokens rounded to blocks
        self._cols: dict[int, object] = {}
        self._lins: dict[tuple, object] = {}

    def attn(self, tau: int):
        """[Σn², A1, A2] for τ (cached): A1 = W·Σn·r, A2 = W·Σn·r·[r > r0], floored at one wave."""
        import numpy as np

        X = self._cols.get(tau)
        if X is None:
            if tau > 0 and self.s is not None:  # FA3: s× the blocks, each sweeping r / s keys
                cap = float(tau * self.sms)
                span = np.ceil(self.s * self.block_tok / cap - 1e-9) * cap
                a1, a2 = span * self.r / self.s, span * self.h / self.s
            elif tau > 0:
                cap = float(tau * self.sms)
                w = np.ceil(self.block_tok / cap - 1e-9) * cap / self.n_sum
                a1 = np.maximum(w * self.nr, cap * self.r)
                a2 = np.maximum(w * self.nh, cap * self.h)
            else:
                a1, a2 = self.nr, self.nh
            X = self._cols[tau] = np.column_stack([self.sq, a1, a2])
        return X

    def attn_kappa(self, tau: int, kappa: float):
        """[Σn², A1 + κ·A2, C]: a spilled (query, key) pair costs (1+κ)x an L2-resident one;
        C = the cold first read of each prefix that stays in L2 (Σr_i, all of them without κ)."""
        import numpy as np

        X = self.attn(tau)
        if kappa:
            return np.column_stack([X[:, 0], X[:, 1] + kappa * X[:, 2], self.sr_res])
        return np.column_stack([X[:, 0], X[:, 1], self.sr])

    def lin(self, gemm=(0, 0), knees=(0, 0)):
        """[Σn·g, 1, (Σn − m_k)+, (Σn − m_k2)+]: token-linear work, g = 1 + (Q−1)·φ(Σn) for the
        GEMM waves (lo, hi), and the batch tokens past each knee (zero columns where off)."""
        import numpy as np

        X = self._lins.get((gemm, knees))
        if X is None:
            n = self.n_lin
            g = 1.0 + self.q * np.array([gemm_share(m, *gemm) for m in n]) if self.q else 1.0
            past = [np.maximum(n - k, 0.0) if k else np.zeros(len(self.y)) for k in knees]
            X = self._lins[(gemm, knees)] = np.column_stack([n * g, np.ones(len(self.y)), *past])
        return X

    def design(self, hyper):
        """(Xa, Xl, offset) for hyper = (τ, κ, L, m_lo, m_hi, (m_k, m_k2), θ7, θ10): prediction
        = Xa·θa + offset + max(Xl·θl, L). θ7 < 0: the cold reads are a free column of Xa;
        else pooled, θ7·C is in the offset; so is θ10·G (the GEMM curve, pooled; the floor L
        is not offered with a curve, whose tables time the GPU alone)."""
        tau, kappa, _, lo, hi, knees, cold, gs = hyper
        A, Xl = self.attn_kappa(tau, kappa), self.lin((lo, hi), knees)
        off = gs * self.gm if gs else 0.0
        if cold < 0:
            return A, Xl, off
        return A[:, :2], Xl, cold * A[:, 2] + off

    def take(self, idx) -> "_PrefillRows":
        out = object.__new__(_PrefillRows)
        out.sms, out.q = self.sms, self.q
        for k in ("y", "n_sum", "n_lin", "gm", "sq", "nr", "r", "h", "nh", "block_tok", "sr", "sr_res"):
            setattr(out, k, getattr(self, k)[idx])
        out.s = self.s[idx] if self.s is not None else None
        out._cols, out._lins = {}, {}
        return out


def _prefill_theta(th, na: int, hyper) -> tuple[float, ...]:
    """θ in PREFILL_FEATURES order from the fitted [Xa, Xl] coefficients (``design``)."""
    _, kappa, floor, _, _, _, cold, gs = hyper
    return (float(th[0]), float(th[1]), float(th[na]), float(th[na + 1]), float(kappa * th[1]), float(floor),
            float(th[2]) if cold < 0 else float(cold), float(th[na + 2]), float(th[na + 3]), float(gs))


def _fit_prefill_rows(rows: _PrefillRows, tau: int, kappa: float, floor: float, lo: int = 0, hi: int = 0,
                      knees: tuple = (0, 0), cold: float = -1.0, gs: float = 0.0):
    """θ (10 floats) of one partition for fixed (τ, κ, L, m_lo, m_hi, (m_k, m_k2), θ7, θ10;
    θ7 < 0: fitted here), its training relative errors and which rows sit on the floor."""
    import numpy as np

    hyper = (tau, kappa, floor, lo, hi, knees, cold, gs)
    Xa, Xl, off = rows.design(hyper)
    na, y = Xa.shape[1], rows.y
    w = 1.0 / y
    base = _nnls(np.column_stack([Xa, Xl]), y - off, w)
    best = None
    cands = [None]
    if floor > 0:  # rows on the floor: the smallest Σn, as far as the unfloored fit goes below 2L
        lin0 = Xl @ base[na:]
        cands += sorted(set(rows.n_sum[lin0 < 2 * floor].tolist()))
    none = np.zeros(len(y), dtype=bool)
    for t in cands:
        if t is None:
            th, fl = base, none
        else:
            fl = rows.n_sum <= t
            X = np.column_stack([Xa, Xl * (~fl)[:, None]])
            th = _nnls(X, y - off - floor * fl, w)
        lin = Xl @ th[na:]
        pred = Xa @ th[:na] + off + (np.maximum(lin, floor) if floor > 0 else lin)
        j = _criterion(pred, y)
        if best is None or j < best[0] - _TIE:
            best = (j, th, pred, fl)
    _, th, pred, fl = best
    return _prefill_theta(th, na, hyper), np.abs(pred / y - 1.0), fl


class _DecodeRows:
    def __init__(self, df, sms: int, kernel: DecodeHyper | None = None):
        self.sms = int(sms)
        self.kernel = kernel or DecodeHyper()
        self.y = df["latency_ms"].to_numpy(dtype=float)
        self.bs = df["bs"].to_numpy(dtype=float)
        self.sr = df["sum_reused"].to_numpy(dtype=float)
        self._base = None
        self._feat: dict[int, object] = {}

    def feat(self, k: int):
        """The floor's feature per row: r_max (k = 0) or the key-waves K for k blocks/SM, or
        for FA3 with γ = k / 100."""
        import numpy as np

        f = self._feat.get(k)
        if f is None:
            if k == 0 and not self.kernel.fa3:
                f = self.sr / self.bs
            else:
                h, g = self.kernel.with_choice(k), k / 100.0 if self.kernel.fa3 else 0.0
                f = np.array([key_waves(h, self.sms, int(b), s, gamma=g) for b, s in zip(self.bs, self.sr)])
            self._feat[k] = f
        return f

    def take(self, idx) -> "_DecodeRows":
        out = object.__new__(_DecodeRows)
        out.sms, out.kernel = self.sms, self.kernel
        for k in ("y", "bs", "sr"):
            setattr(out, k, getattr(self, k)[idx])
        out._base = None
        out._feat = {k: f[idx] for k, f in self._feat.items()}
        return out


MAX_FLOOR_CANDIDATES = 12  # floor thresholds tried per decode fit (spread over the distinct values)


def _thresholds(vals) -> list:
    """Candidate floor thresholds: every distinct value, or MAX_FLOOR_CANDIDATES of them evenly
    spread in rank, the smallest and the largest included (rows sit on the floor from the
    smallest Σr/K up). A profiled table has ~20 distinct values per partition, random-context
    tables one per row, and the (k, β) grid multiplies them. Format 7 tried the 12 smallest: on
    the H200 table's 132 SMs that left out "every row on the floor", the best fit there with
    split tails (in-sample max error 5.9 % against 8.4 % for the best of the 12 smallest).
    Trying all ~20 held out no better than 12 spread, at 1.6x the test suite's fit time."""
    v = sorted(set(vals.tolist()))
    if len(v) <= MAX_FLOOR_CANDIDATES:
        return v
    n = MAX_FLOOR_CANDIDATES - 1
    return [v[round(i * (len(v) - 1) / n)] for i in range(n + 1)]


def _fit_decode_rows(rows: _DecodeRows, k: int, beta: float):
    """θ (DECODE_WIDTH floats) of one partition for fixed (k, β), and its training relative
    errors. FA3 (k unused): the floor is β·K0 + δ·X, K0 the keys of one block per SM and X what
    a second one adds (``feat`` at γ = 0 and 1), δ fitted with 0 ≤ δ ≤ β; θ5 = γ = δ/β."""
    import numpy as np

    y, sr, bs = rows.y, rows.sr, rows.bs
    fa3 = bool(rows.kernel.fa3)
    fk = rows.feat(0 if fa3 else k)
    xk = rows.feat(100) - fk if fa3 else None
    rho = sr / fk  # which rows sit on the floor: the smallest Σr per unit of floor feature
    w = 1.0 / y
    one = np.ones(len(y))
    if rows._base is None:
        rows._base = _nnls(np.column_stack([sr, bs, one]), y, w)
    base = rows._base
    cands = [None]
    if beta > 0:  # floored rows: the smallest Σr/K. Largest threshold first, so that of splits
        # that fit equally (rows the floor explains exactly as well as θ1·Σr) the fit keeps the one
        # with the most rows on the floor, rather than θ1 pinned by two of them at the edge.
        # FA3: every threshold, no reach limit (its floor has δ too): with triton's 12 spread
        # within the reach, the H200 table's γs came out 0 to 0.59 in no order, 112 SMs at 9.7 %
        lim = 2.0 * beta / base[0] if base[0] > 0 and not fa3 else np.inf  # as far as the floor can reach
        cands += (sorted(set(rho.tolist())) if fa3 else _thresholds(rho[rho <= lim]))[::-1]
    best = None
    none = np.zeros(len(y), dtype=bool)
    for t in cands:
        delta = 0.0
        if t is None:
            th, fl = base, none
        else:
            fl = rho <= t
            cols = [sr * (~fl), bs, one]
            if fa3:
                th = _nnls(np.column_stack(cols + [xk * fl]), y - beta * fk * fl, w, last_max=beta)
                delta = th[3]
            else:
                th = _nnls(np.column_stack(cols), y - beta * fk * fl, w)
        pred = np.maximum(th[0] * sr, beta * fk + (delta * xk if fa3 else 0.0)) + th[1] * bs + th[2]
        j = _criterion(pred, y)
        if best is None or j < best[0] - _TIE:
            best = (j, th, pred, fl, delta)
    _, th, pred, fl, delta = best
    theta = (float(th[0]), float(th[1]), float(th[2]), float(beta), float(delta / beta) if delta > 0 else 0.0)
    return theta, np.abs(pred / y - 1.0), fl


def _polish(kind: str, view, hyper, fits):
    """Joint NNLS of all partitions' θ and the pooled values — the floor (L or β) for the
    floored rows the grid search settled on, the prefill cold-read cost θ7 and GEMM-curve
    scale θ10 — so that they are exact, not grid points. Returns (hyper, fits) of the
    polished model (the caller keeps it only if J improves), or None when nothing is pooled."""
    import numpy as np

    cold = kind == "prefill" and hyper[6] >= 0
    gs = kind == "prefill" and hyper[7] > 0
    free = (*hyper[:6], -1.0, 0.0) if kind == "prefill" else hyper  # θ7, θ10 as columns, pooled below
    blocks, shared, ys, owners = [], [], [], []
    for s, rows in view.items():
        fl = fits[s][2]
        if kind == "prefill":
            Xa, Xl, _ = rows.design(free)
            blocks.append(np.column_stack([Xa[:, :2] if cold else Xa, Xl * (~fl)[:, None]]))
            shared.append(np.column_stack([fl.astype(float)] + ([Xa[:, 2]] if cold else [])
                                          + ([rows.gm] if gs else [])))
        else:
            blocks.append(np.column_stack([rows.sr * (~fl), rows.bs, np.ones(len(rows.y))]))
            shared.append((rows.feat(hyper[0]) * fl)[:, None])
        ys.append(rows.y)
        owners.append(s)
    S = np.concatenate(shared)
    if not S.any():
        return None
    width = blocks[0].shape[1]
    X = np.zeros((len(S), width * len(blocks) + S.shape[1]))
    r0 = 0
    for i, b in enumerate(blocks):
        X[r0:r0 + len(b), i * width:(i + 1) * width] = b
        r0 += len(b)
    X[:, width * len(blocks):] = S
    y = np.concatenate(ys)
    c = _nnls(X, y, 1.0 / y)
    pooled = float(c[width * len(blocks)])
    if kind == "prefill":
        extra = iter(float(v) for v in c[width * len(blocks) + 1:])
        h = (hyper[0], hyper[1], pooled, *hyper[3:6], next(extra) if cold else hyper[6],
             next(extra) if gs else hyper[7])
    else:
        h = (hyper[0], pooled)
    new = {}
    for i, s in enumerate(owners):
        th, rows = c[i * width:(i + 1) * width], view[s]
        if kind == "prefill":
            Xa, Xl, off = rows.design(h)  # the block's layout: Xa (θ7 in it only if free), then Xl
            na = Xa.shape[1]
            pred = Xa @ th[:na] + off + np.maximum(Xl @ th[na:], pooled)
            theta = _prefill_theta(th, na, h)
        else:
            pred = np.maximum(th[0] * rows.sr, pooled * rows.feat(hyper[0])) + th[1] * rows.bs + th[2]
            theta = (float(th[0]), float(th[1]), float(th[2]), pooled, 0.0)
        new[s] = (theta, np.abs(pred / rows.y - 1.0), fits[s][2])
    return h, new


def _knees_identified(parts, knees) -> bool:
    """Whether every partition's rows pin each piece of the bent line: two batch sizes (Σn)
    up to the first knee, one past each knee. Otherwise a piece is free, and the fold that
    holds out the one row below a knee was predicted 3x its time (synthetic table)."""
    import numpy as np

    k1, k2 = knees
    if not k1:
        return True
    for rows in parts.values():
        n = np.unique(rows.n_sum)
        if (n <= k1).sum() < 2 or not (n > (k2 or k1)).any() or (k2 and not ((n > k1) & (n <= k2)).any()):
            return False
    return True


def _prefill_floors(parts):
    ymin = min(float(p.y.min()) for p in parts.values())
    return [0.0] + [round(f * ymin, 6) for f in FLOOR_GRID]


def _decode_grid(parts, k: int):
    import numpy as np
    bmax = max(float((p.y / p.feat(k)).max()) for p in parts.values())
    return [0.0] + [float(b) for b in np.geomspace(bmax * 1e-3, bmax, BETA_COARSE)]


def _decode_refine(best):
    import numpy as np
    if best <= 0:
        return []
    step = 1e3 ** (1.0 / (BETA_COARSE - 1))
    return [float(b) for b in np.geomspace(best / step, best * step, BETA_FINE)]


class _Pooled:
    """Per-partition θ, hyper-parameters shared by all partitions and chosen on their
    training rows by J. Fits of a whole partition are cached per hyper-parameter value, so
    cross-validation (one partition's fold out at a time) refits only that partition."""

    def __init__(self, kind: str, parts: Mapping[int, object], knee: int = 0, gemm: bool = False,
                 floor: bool = True, taus: Sequence[int] = WAVE_TOKENS_GRID):
        self.kind = kind
        self.taus = tuple(taus)
        self.floor = floor
        self.knee = knee
        self.gemm = gemm
        self.parts = dict(parts)
        self._fit_rows = _fit_prefill_rows if kind == "prefill" else _fit_decode_rows
        self._cache: dict = {}

    def _fit_one(self, rows, hyper):
        return self._fit_rows(rows, *hyper)

    def _full(self, s, hyper):
        k = (s, hyper)
        v = self._cache.get(k)
        if v is None:
            v = self._cache[k] = self._fit_one(self.parts[s], hyper)
        return v

    def select(self, replace: Mapping[int, object] | None = None):
        """(hyper, {sms: θ}) on all partitions, with ``replace[s]`` (training rows) for s."""
        import numpy as np

        replace = replace or {}
        view = {s: replace.get(s, p) for s, p in self.parts.items()}
        fa3_decode = self.kind == "decode" and next(iter(view.values())).kernel.fa3

        def fit(s, hyper):
            return self._fit_one(view[s], hyper) if s in replace else self._full(s, hyper)

        def evaluate(hyper):
            fits = {s: fit(s, hyper) for s in view}
            e = np.concatenate([f[1] for f in fits.values()])
            return _errors_j(e), fits

        best = None

        def scan(grid):
            nonlocal best
            for h in grid:
                j, fits = evaluate(h)
                if best is None or j < best[0] - _TIE:
                    best = (j, h, fits)

        if self.kind == "prefill":
            # Coordinate search: (τ, κ), then the floor L, the GEMM waves (m_lo, m_hi), the
            # projections' knee m_k and the pooled cold-read cost θ7, again while a round moves
            # any of them (at most three rounds). θ7 starts free per partition (-1); its grid
            # is the median of those fits times COLD_GRID, and from then on it is pooled
            # whatever J says, since a free θ7 always fits its own rows at least as well. With a
            # GEMM curve its scale θ10 (pooled, starting at 1) closes each round; the launch floor
            # is not offered then (such tables time the GPU alone).
            curve = any(p.gm.any() for p in view.values())
            floors = _prefill_floors(view) if self.floor and not curve else [0.0]
            h = (0, 0.0, 0.0, 0, 0, (0, 0), -1.0, 1.0 if curve else 0.0)
            for _ in range(3):
                scan([(tau, k, *h[2:]) for tau in self.taus for k in (SPILL_GRID if self.knee else (0.0,))])
                scan([(*best[1][:2], f, *best[1][3:]) for f in floors])
                if self.gemm:
                    scan([(*best[1][:3], *g, *best[1][5:]) for g in GEMM_WAVES_GRID])
                scan([(*best[1][:5], m, *best[1][6:]) for m in GEMM_KNEE_GRID if _knees_identified(view, m)])
                top = best[1]
                free = evaluate((*top[:6], -1.0, top[7]))[1]  # the pilot: θ7 fitted per partition
                pilot = float(np.median([f[0][6] for f in free.values()]))
                colds = sorted({pilot * c for c in COLD_GRID} | ({top[6]} if top[6] >= 0 else set()))
                if top[6] < 0:
                    best = None  # pooled from here on
                scan([(*top[:6], c, top[7]) for c in colds])
                if curve:
                    scan([(*best[1][:7], g) for g in GEMM_SCALE_GRID])
                if best[1] == h:
                    break  # nothing moved: another round would repeat this one
                h = best[1]
        else:  # β over a coarse grid for each k, then finer around the best (k, β)
            kernel = next(iter(view.values())).kernel
            # k measured (the kernel's occupancy, profiling.decode_kernel): not chosen from rows;
            # FA3 has none (its second blocks are each partition's δ)
            ks = ((0,) if fa3_decode else (kernel.blocks_per_sm,) if kernel.blocks_per_sm
                  else DECODE_BLOCKS_GRID if kernel.usable else (0,))
            for k in ks:
                scan([(k, b) for b in _decode_grid(view, k)])
            k, b = best[1]
            scan([(k, x) for x in _decode_refine(b)])
        # FA3: δ ≤ β ties each partition's δ to the pooled β, which the joint NNLS cannot hold, so
        # β stays the refined grid's (steps of 4.8 %)
        polished = None if fa3_decode else _polish(self.kind, view, best[1], best[2])
        if polished is not None:
            j = _errors_j(np.concatenate([f[1] for f in polished[1].values()]))
            if j < best[0] - _TIE:
                best = (j, *polished)
                if self.kind == "decode":
                    scan([best[1]])  # the floored rows again, at the exact β: the grid's may differ
        _, h, fits = best
        return h, {s: f[0] for s, f in fits.items()}


def _prefill_parts(df, knee: int, device_sms: int = 0, curve: GemmCurves | None = None, heads: int = 0,
                   fa3: Fa3Grid | None = None):
    return {int(s): _PrefillRows(g, int(s), knee, BLOCK_TOKENS, device_sms, curve=curve, heads=heads, fa3=fa3)
            for s, g in df.groupby("prefill_sms")}


def _prefill_pooled(parts, knee: int, device_sms: int, launch_floor: bool, fa3: Fa3Grid | None) -> "_Pooled":
    # FA3's τ is its tile's (fa3_kernels), not chosen from the rows
    taus = (fa3.tokens_per_sm,) if fa3 is not None else WAVE_TOKENS_GRID
    return _Pooled("prefill", parts, knee, bool(device_sms), launch_floor, taus=taus)


def _prefill_hyper(hyper, knee: int, device_sms: int, min_tokens: int, heads: int,
                   fa3: Fa3Grid | None = None) -> PrefillHyper:
    tau, kappa, _, lo, hi, (m, m2), _, _ = hyper
    return PrefillHyper(int(tau), fa3.block_tokens if fa3 is not None else BLOCK_TOKENS, int(knee) if kappa else 0,
                        int(device_sms) if lo else 0, int(lo), int(hi), int(m), int(m2), int(min_tokens), int(heads),
                        split_kv_device_sms=fa3.device_sms if fa3 is not None else 0,
                        kv_heads=fa3.kv_heads if fa3 is not None else 0)


def min_batch_tokens(curve: GemmCurves | None) -> int:
    """The smallest batch the prefill fit models: all of them with a measured GEMM curve (the
    curve follows cuBLAS's choices below 128 tokens too), else MIN_BATCH_TOKENS."""
    return 0 if curve is not None else MIN_BATCH_TOKENS


def _decode_parts(df, kernel: DecodeHyper | None = None):
    return {int(s): _DecodeRows(g, int(s), kernel) for s, g in df.groupby("decode_sms")}


def fit_prefill_frame(df, l2_knee: int = 0, device_sms: int = 0, launch_floor: bool = True,
                      gemm_curve: GemmCurves | None = None, heads: int = 0,
                      fa3: Fa3Grid | None = None) -> tuple[PrefillHyper, dict[int, tuple[float, ...]]]:
    """(hyper-parameters, {prefill_sms: θ}) from solo_prefill.csv rows (all partitions);
    ``device_sms`` (the GPU's SM count) lets the fit choose GEMM waves, 0 = not;
    ``launch_floor``: offer the host's launch floor L (False for rows that time the GPU alone);
    ``gemm_curve``: the table's measured projection times (θ10's column; None: θ10 = 0);
    ``heads``: the model's query heads, for the cold waves (0: every prefix is read cold apart);
    ``fa3``: the attention grid is FA3's (fa3_kernels), else triton's."""
    nmin = min_batch_tokens(gemm_curve)
    parts = _prefill_parts(prefill_domain(df, nmin)[0], l2_knee, device_sms, gemm_curve, heads, fa3)
    hyper, th = _prefill_pooled(parts, l2_knee, device_sms, launch_floor, fa3).select()
    return _prefill_hyper(hyper, l2_knee, device_sms, nmin, heads, fa3), th


def prefill_domain(df, min_tokens: int = MIN_BATCH_TOKENS):
    """(rows the prefill fit models, rows of batches below ``min_tokens``: predicted as bounds)."""
    small = df["sum_new"].to_numpy() < min_tokens
    return df[~small], df[small]


def fit_decode_frame(df, kernel: DecodeHyper | None = None) -> tuple[DecodeHyper, dict[int, tuple[float, ...]]]:
    """(hyper-parameters, {decode_sms: θ}) from solo_decode.csv rows (all partitions; k and β
    are shared). ``kernel`` describes the decode kernel (``decode_kernel``); None: no wave count."""
    kernel = kernel or DecodeHyper()
    (k, _), th = _Pooled("decode", _decode_parts(df, kernel)).select()
    return kernel.with_choice(k), th


def heldout_errors(kind: str, df, folds: int = 5, seed: int = 0, l2_knee: int = 0,
                   decode_kernel: DecodeHyper | None = None, device_sms: int = 0,
                   launch_floor: bool = True, gemm_curve: GemmCurves | None = None,
                   heads: int = 0, fa3: Fa3Grid | None = None) -> dict[int, object]:
    """{sms: relative errors of that partition's rows, each predicted without having seen it}.

    k-fold per partition (the rows of a partition in a seeded random order, every k-th row
    a fold); for partition s and fold f the model is fitted on every row except s's fold f —
    s's θ on its other rows, the pooled hyper-parameters on all partitions' training rows.
    The GEMM curve is an input (measured apart from the rows, like the SM count), not a row.
    """
    import numpy as np

    col = "prefill_sms" if kind == "prefill" else "decode_sms"
    nmin = min_batch_tokens(gemm_curve)
    if kind == "prefill":
        df = prefill_domain(df, nmin)[0]  # batches below the smallest modelled one are bounds, not fitted
    kernel = decode_kernel or DecodeHyper()
    parts = _prefill_parts(df, l2_knee, device_sms, gemm_curve, heads, fa3) if kind == "prefill" \
        else _decode_parts(df, kernel)
    pooled = _prefill_pooled(parts, l2_knee, device_sms, launch_floor, fa3) if kind == "prefill" \
        else _Pooled(kind, parts)
    out = {}
    for s, rows in parts.items():
        n = len(rows.y)
        k = min(folds, n)
        order = np.random.default_rng(seed).permutation(n)
        err = np.empty(n)
        for f in range(k):
            test = order[f::k]
            train = np.setdiff1d(order, test)
            hyper, th = pooled.select({s: rows.take(train)})
            hp = _prefill_hyper(hyper, l2_knee, device_sms, nmin, heads, fa3) if kind == "prefill" else None
            dh = kernel.with_choice(hyper[0]) if kind == "decode" else None
            m = SoloLatencyModel({s: th[s]} if kind == "prefill" else {}, {s: th[s]} if kind == "decode" else {},
                                 prefill_hyper=hp, decode_hyper=dh, gemm_curve=gemm_curve, _partial=True)
            g = df[df[col] == s].iloc[test]
            pred = m.predict_prefill_frame(g) if kind == "prefill" else m.predict_decode_frame(g)
            err[test] = np.abs(pred / rows.y[test] - 1.0)
        out[s] = err
    return out


# ----------------------------------------------------------------------------- the model

def _pad(th, width: int, paper: int, kind: str, s) -> tuple[float, ...]:
    th = tuple(float(t) for t in th)
    if len(th) == paper or (kind == "prefill" and len(th) in (6, 7, 9)) or (kind == "decode" and len(th) == 4):
        # the paper's equation alone, or the terms up to the launch floor / cold reads / knees
        # / the decode floor (format 8): the later extension terms off
        th = th + (0.0,) * (width - len(th))
    if len(th) != width or any(not (t >= 0.0) or t == float("inf") for t in th):
        raise ValueError(f"{kind} θ for {s} SMs must be {paper} or {width} finite non-negative floats, got {th}")
    return th


class _PartitionTable:
    """θ per SM count with the interpolation policy of the module docstring."""

    def __init__(self, thetas: Mapping[int, Sequence[float]], kind: str, width: int, paper: int,
                 allow_empty: bool = False):
        if not thetas and not allow_empty:
            raise ValueError(f"no {kind} partitions")
        self.kind = kind
        self.profiled: dict[int, tuple[float, ...]] = {int(s): _pad(th, width, paper, kind, s)
                                                       for s, th in thetas.items()}
        self.sms = sorted(self.profiled)
        self._cache = dict(self.profiled)  # profiled + interpolated, the hot-path lookup

    def __call__(self, sms: int) -> tuple[float, ...]:
        th = self._cache.get(sms)
        if th is None:
            th = self._cache[sms] = self._derive(sms)
        return th

    def _derive(self, s: int) -> tuple[float, ...]:
        if s <= 0:
            raise UnprofiledPartition(f"{self.kind} partition of {s} SMs is not a partition")
        i = bisect.bisect_left(self.sms, s)
        if i == 0:
            raise UnprofiledPartition(
                f"{self.kind} partition of {s} SMs is below every profiled one {self.sms}; "
                f"profile it (python -m profiling.run ...) — extrapolating would underestimate")
        if i == len(self.sms):
            return self.profiled[self.sms[-1]]  # more SMs than profiled: conservative
        lo, hi = self.sms[i - 1], self.sms[i]
        w = (1.0 / s - 1.0 / hi) / (1.0 / lo - 1.0 / hi)  # weight of lo, linear in 1/SMs
        th = [w * a + (1.0 - w) * b for a, b in zip(self.profiled[lo], self.profiled[hi])]
        if self.kind == "decode":  # FA3's γ is no rate in 1/SMs: the dearer neighbour's (on 132
            # SMs, where a step holds one block per SM, the fit leaves it 0)
            th[4] = max(self.profiled[lo][4], self.profiled[hi][4])
        return tuple(th)


class SoloLatencyModel:
    """Eq. 1 / Eq. 2 (+ the docstring's terms) per partition. ``prefill_ms``/``decode_ms``
    are the hot path.

    ``prefill``/``decode`` map SM counts to θ tuples in PREFILL_FEATURES / DECODE_FEATURES
    order; a tuple of the paper's width (4 / 3) means that equation alone.
    """

    def __init__(self, prefill: Mapping[int, Sequence[float]], decode: Mapping[int, Sequence[float]],
                 prefill_hyper: PrefillHyper | None = None, decode_hyper: DecodeHyper | None = None, *,
                 gemm_curve: GemmCurves | None = None, _partial: bool = False):
        self._prefill = _PartitionTable(prefill, "prefill", PREFILL_WIDTH, PAPER_PREFILL, _partial)
        if gemm_curve is None and any(th[9] for th in self._prefill.profiled.values()):
            raise ValueError("prefill θ10 (GEMM curve) > 0 needs a gemm_curve")
        missing = sorted(set(self._prefill.sms) - set(gemm_curve.sms)) if gemm_curve is not None else []
        if missing:
            raise ValueError(f"gemm_curve has no points for prefill partitions {missing} (it has {gemm_curve.sms})")
        self.gemm_curve = gemm_curve
        self._decode = _PartitionTable(decode, "decode", DECODE_WIDTH, PAPER_DECODE, _partial)
        self.prefill_hyper = prefill_hyper or PrefillHyper()
        self._tau = self.prefill_hyper.wave_tokens_per_sm
        self._blk = self.prefill_hyper.block_tokens
        self._knee = self.prefill_hyper.l2_knee_tokens
        self._knee_or_inf = self._knee or float("inf")
        self._gemm_lo, self._gemm_hi = self.prefill_hyper.gemm_waves
        self._mk = self.prefill_hyper.gemm_knee_tokens
        self._mk2 = self.prefill_hyper.gemm_knee2_tokens
        self._nmin = self.prefill_hyper.min_batch_tokens
        self._heads = self.prefill_hyper.cold_head_blocks
        self._pad_q = self.prefill_hyper.padded_query_blocks
        self._fa3 = self.prefill_hyper.fa3
        self.decode_hyper = decode_hyper or DecodeHyper()
        self._waves_on = self.decode_hyper.waves

    @property
    def prefill_sms(self) -> list[int]:
        return list(self._prefill.sms)

    @property
    def decode_sms(self) -> list[int]:
        return list(self._decode.sms)

    def prefill_theta(self, prefill_sms: int) -> tuple[float, ...]:
        return self._prefill(prefill_sms)

    def decode_theta(self, decode_sms: int) -> tuple[float, ...]:
        return self._decode(decode_sms)

    def prefill_ms(self, prefill_sms: int, reqs: Sequence[PrefillReq]) -> float:
        """Solo latency of one whole-model prefill forward; 0 for an empty batch."""
        t = self._prefill(prefill_sms)
        blk, knee = self._blk, self._knee_or_inf
        b1 = blk - 1
        sq = nr = n = nh = bt = 0
        r_lo = r_hi = reqs[0].r if reqs else 0
        blocks = []  # (r, block-rounded tokens) per request
        resident = []  # prefixes that stay in L2: read cold once
        # Padded query blocks: every request gets the longest one's; a dead block sweeps its
        # request's prefix and new tokens with no valid row (module docstring).
        qmax = (max(q.n for q in reqs) + b1) // blk * blk if self._pad_q and len(reqs) > 1 else 0
        for q in reqs:
            qn = q.n
            qr = q.r
            tok = (qn + b1) // blk * blk
            dead = qmax - tok if qmax > tok else 0
            n += qn
            sq += qn * qn + 2 * dead * qn
            e = qn + dead  # query rows that sweep the prefix
            nr += e * qr
            if qr > knee:
                nh += e * qr
            elif qr:
                resident.append(qr)
            tok += dead
            bt += tok
            blocks.append((qr, tok))
            if qr > r_hi:
                r_hi = qr
            elif qr < r_lo:
                r_lo = qr
        if n <= 0:
            return 0.0
        cap = self._tau * prefill_sms  # query tokens per wave (0: no wave quantization)
        if cap and self._fa3 is not None:  # FA3: s× the blocks, each sweeping r / s keys (fa3_kernels)
            s = self._fa3.splits(len(reqs), max(q.n for q in reqs), max(q.n + q.r for q in reqs))
            if r_lo == r_hi:
                span = -(-(s * bt) // cap) * cap
                a1 = span * r_hi / s
                a2 = a1 if r_hi > knee else 0.0
            else:
                a1, a2 = self._waves([(r, tok * s) for r, tok in blocks], cap, knee)
                a1, a2 = a1 / s, a2 / s
        elif not cap:
            a1, a2 = nr, nh
        elif r_lo == r_hi:  # one prefix length (e.g. no cache hits): every wave is alike
            span = -(-bt // cap) * cap
            a1 = span * r_hi
            a2 = span * r_hi if r_hi > knee else 0.0
        else:
            a1, a2 = self._waves(blocks, cap, knee)
        cold = 0
        if resident:  # one cold read per cold wave, of the longest prefixes (all of them if K >= their count)
            k = cold_waves(len(reqs), self._heads, prefill_sms)
            cold = sum(resident) if k >= len(resident) else sum(heapq.nlargest(k, resident))
        lin = self._lin(t, prefill_sms, n)
        return t[0] * sq + t[1] * a1 + t[4] * a2 + t[6] * cold + (lin if lin > t[5] else t[5])

    def _lin(self, t, sms: int, n: float) -> float:
        """The token-linear work of an n-token batch: θ3·g·n + θ4 + θ8·(n − m_k)+ + θ9·(n − m_k2)+
        + θ10·G(n), n raised to the smallest batch the fit saw (``min_batch_tokens``)."""
        if n < self._nmin:
            n = self._nmin
        lin = t[2] * n * (self._gemm_g(sms, n) if self._gemm_lo else 1.0) + t[3]
        if self._mk and n > self._mk:
            lin += t[7] * (n - self._mk)
            if self._mk2 and n > self._mk2:
                lin += t[8] * (n - self._mk2)
        if t[9]:
            lin += t[9] * self.gemm_curve.at(sms, n)
        return lin

    def _gemm_g(self, sms: int, tokens: float) -> float:
        """g = 1 + (Q−1)·φ(Σn): the token-linear work's factor for GEMM waves (module docstring)."""
        q = gemm_excess(self.prefill_hyper.gemm_device_sms, sms)
        return 1.0 + q * gemm_share(tokens, self._gemm_lo, self._gemm_hi) if q else 1.0

    @staticmethod
    def _waves(blocks, cap: int, knee: float) -> tuple[float, float]:
        """Wave-quantized attention work: blocks packed longest prefix first into waves of
        ``cap`` query tokens, each wave as long as its longest block (r of its first block).
        Equals W·Σn·r (and W·Σn·r·[r > r0]) on a uniform batch; on a mixed one a wave is never
        averaged down by short blocks, and adding a request never lowers the estimate."""
        a1 = a2 = 0.0
        pos = nxt = 0  # tokens packed so far; where the next wave begins
        for r, tok in sorted(blocks, reverse=True):
            pos += tok
            if pos > nxt:  # waves begin at nxt, nxt + cap, ... below pos
                starts = (pos - nxt - 1) // cap + 1
                nxt += starts * cap
                a1 += starts * cap * r
                if r > knee:
                    a2 += starts * cap * r
        return a1, a2

    def prefill_ms_sums(self, prefill_sms: int, sum_new_sq: float, sum_new_reused: float, sum_new: float,
                        bs: int = 1) -> float:
        """Prefill latency from sums only: taken as a uniform batch of ``bs`` requests of
        Σn/bs new and Σn·r/Σn reused tokens each (how the profiled CSV rows are made)."""
        if sum_new <= 0:
            return 0.0
        t = self._prefill(prefill_sms)
        r = sum_new_reused / sum_new
        spill = r if self._knee and r > self._knee else 0.0
        cap = self._tau * prefill_sms
        if cap:  # uniform: ⌈bs·k·B / cap⌉ waves, each as long as one block (k·B tokens per request)
            k_tok = -(-(sum_new / bs) // self._blk) * self._blk
            s = self._fa3.splits(bs, int(sum_new / bs), int(sum_new / bs + r)) if self._fa3 is not None else 1
            span = -(-(s * bs * k_tok) // cap) * cap
            a1, a2 = span * r / s, span * spill / s
        else:
            a1, a2 = sum_new_reused, sum_new * spill
        lin = self._lin(t, prefill_sms, sum_new)
        cold = 0.0 if spill else cold_waves(bs, self._heads, prefill_sms) * r
        return t[0] * sum_new_sq + t[1] * a1 + t[4] * a2 + t[6] * cold + (lin if lin > t[5] else t[5])

    def decode_ms(self, decode_sms: int, bs: int, sum_reused: int, max_reused: float | None = None) -> float:
        """Solo latency of one decode iteration; 0 for an empty batch.

        ``max_reused``: the longest context in the batch; None = Σr/bs (a uniform batch, the
        smallest possible — pass the real one where it is known)."""
        if bs <= 0:
            return 0.0
        t = self._decode(decode_sms)
        a = t[0] * sum_reused
        if t[3]:
            if self._waves_on:
                f = t[3] * key_waves(self.decode_hyper, decode_sms, bs, sum_reused, max_reused, t[4])
            else:
                f = t[3] * (sum_reused / bs if max_reused is None else max_reused)
            if f > a:
                a = f
        return a + t[1] * bs + t[2]

    # -- frames (uniform-batch CSV rows), vectorized; equal to the hot path on those batches

    def predict_prefill_frame(self, df):
        import numpy as np

        out = np.empty(len(df))
        pos = {s: np.flatnonzero(df["prefill_sms"].to_numpy() == s) for s in df["prefill_sms"].unique()}
        for s, idx in pos.items():
            t = self._prefill(int(s))
            rows = _PrefillRows(df.iloc[idx], int(s), self._knee, self._blk, self.prefill_hyper.gemm_device_sms,
                                self._nmin, self.gemm_curve if t[9] else None, self._heads, self._fa3)
            a = rows.attn(self._tau)
            lin = rows.lin((self._gemm_lo, self._gemm_hi), (self._mk, self._mk2)) @ (t[2], t[3], t[7], t[8]) \
                + t[9] * rows.gm
            out[idx] = a[:, 0] * t[0] + a[:, 1] * t[1] + a[:, 2] * t[4] + rows.sr_res * t[6] + np.maximum(lin, t[5])
        return out

    def predict_decode_frame(self, df):
        import numpy as np

        # the hot path row by row (decode tables are a few hundred rows): equal by construction
        return np.array([self.decode_ms(int(s), int(b), float(r)) for s, b, r in
                         zip(df["decode_sms"], df["bs"], df["sum_reused"])], dtype=float)

    def pooled_terms(self) -> dict:
        """The extension terms shared by all partitions, as fitted (fit.json ``pooled``; for
        reading only — prediction uses the per-partition θs)."""
        pre = [self._prefill.profiled[s] for s in self._prefill.sms]
        dec = [self._decode.profiled[s] for s in self._decode.sms]
        kappa = next((t[4] / t[1] for t in pre if t[1] > 0), 0.0)
        return {"wave_tokens_per_sm": self._tau, "l2_knee_tokens": self._knee,
                "gemm_waves_tokens": [self._gemm_lo, self._gemm_hi], "gemm_knee_tokens": [self._mk, self._mk2],
                "cold_prefix_ms_per_token": max((t[6] for t in pre), default=0.0),
                "l2_spill_ratio": round(kappa, 9), "launch_floor_ms": max((t[5] for t in pre), default=0.0),
                "decode_floor_ms_per_token": max((t[3] for t in dec), default=0.0),
                "decode_blocks_per_sm": self.decode_hyper.blocks_per_sm,
                "decode_fa3_gamma": {str(s): self._decode.profiled[s][4] for s in self._decode.sms}
                if self.decode_hyper.fa3 else None,
                "gemm_curve_scale": [round(min((t[9] for t in pre), default=0.0), 4),
                                     round(max((t[9] for t in pre), default=0.0), 4)]}

    # -- fitting / (de)serialization

    @classmethod
    def fit(cls, solo_prefill, solo_decode, l2_knee: int = 0,
            decode_kernel: DecodeHyper | None = None, device_sms: int = 0,
            launch_floor: bool = True, gemm_curve: GemmCurves | None = None,
            heads: int = 0, padded_query_blocks: bool = False, fa3: Fa3Grid | None = None) -> "SoloLatencyModel":
        """Fit from the two solo CSV frames; ``l2_knee`` = r0 (0: no L2-spill term);
        ``decode_kernel`` (``decode_kernel()``) lets the decode fit count waves;
        ``device_sms`` (the GPU's SM count) lets the prefill fit choose GEMM waves;
        ``gemm_curve``: the table's measured projection times (θ10); ``heads``: query heads
        (the cold waves); ``padded_query_blocks``: the attention kernel pads every request to
        the longest one's query blocks (SGLang's triton extend). The profiled batches are
        uniform, so this cannot be fitted; it only changes mixed batches. ``fa3``: the prefill
        attention runs FA3's grid (fa3_kernels), else triton's."""
        hyper, pre = fit_prefill_frame(solo_prefill, l2_knee, device_sms, launch_floor, gemm_curve, heads, fa3)
        hyper = replace(hyper, padded_query_blocks=int(bool(padded_query_blocks)))
        dh, dec = fit_decode_frame(solo_decode, decode_kernel)
        return cls(pre, dec, hyper, dh, gemm_curve=gemm_curve)

    def to_dict(self) -> dict:
        """fit.json's core: {"format": 10, "prefill_hyper": {...}, "decode_hyper": {...},
        "prefill": {"<sms>": {"theta": [...]}}, "decode": {...}, "gemm_curve": {...} or null}."""
        return {
            "format": FORMAT,
            "prefill_features": list(PREFILL_FEATURES),
            "decode_features": list(DECODE_FEATURES),
            "prefill_hyper": asdict(self.prefill_hyper),
            "decode_hyper": asdict(self.decode_hyper),
            "pooled": self.pooled_terms(),
            "prefill": {str(s): {"theta": list(self._prefill.profiled[s])} for s in self._prefill.sms},
            "decode": {str(s): {"theta": list(self._decode.profiled[s])} for s in self._decode.sms},
            "gemm_curve": self.gemm_curve.to_dict() if self.gemm_curve is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "SoloLatencyModel":
        """Format 10, or format 8 (the same without FA3's grids: the triton tables). Other
        formats are refused with the command that refits them: no shipped table has one."""
        fmt = d.get("format", 1)
        if fmt not in (8, FORMAT):
            raise ValueError(f"fit.json format {fmt!r} is not supported (this version reads 8 and {FORMAT}); "
                             f"refit the table: python -m sglang_mux.estimator fit DIR")

        def thetas(kind, width):
            out = {}
            for s, v in d[kind].items():
                th = v["theta"] if isinstance(v, Mapping) else v
                if (kind == "prefill" or fmt == FORMAT) and len(th) != width:
                    raise ValueError(f"format-{fmt} {kind} θ for {s} SMs must have {width} values, got {len(th)}")
                out[int(s)] = th
            return out

        hp, dh = d.get("prefill_hyper") or {}, d.get("decode_hyper") or {}  # no decode_hyper: floor β·r_max
        if not isinstance(hp, Mapping) or not isinstance(dh, Mapping):
            raise ValueError("prefill_hyper and decode_hyper must be objects")
        fa3 = sorted(k for k in hp if k in ("split_kv_device_sms", "kv_heads")) + sorted(k for k in dh if k == "fa3")
        if fmt == 8 and fa3:
            raise ValueError(f"fit.json format 8 has no FA3 grid, but its hyper-parameters name {fa3}: "
                             "a malformed file; refit it")
        curve = None
        if d.get("gemm_curve") is not None:
            if not isinstance(d["gemm_curve"], Mapping):
                raise ValueError("gemm_curve must be an object or null")
            curve = GemmCurves.from_dict(d["gemm_curve"])
        return cls(thetas("prefill", PREFILL_WIDTH), thetas("decode", DECODE_WIDTH), PrefillHyper(**hp),
                   DecodeHyper(**dh), gemm_curve=curve)
