import math

import pytest

from sglang_mux.fused_price import FusedPrice, graph_cliffs


def test_the_solo_price_until_something_is_served():
    fp = FusedPrice()
    assert fp.price(10.0) == 10.0 and fp.price(0.0) == 0.0
    assert fp.to_dict() == {"fixed_ms": 0.0, "slope": 1.0, "ratio": 0.0, "margin_ms": 0.0}


def test_a_fixed_host_part_and_a_gpu_slope_are_learned_from_served_iterations():
    """Served = 17 ms + 0.83 x solo (an H100's eager launches bound small chunks): after the
    warm-up the price is exactly that, with no margin on noiseless data."""
    fp = FusedPrice(warmup=8)
    for solo in (7.0, 20.0, 43.0, 7.0, 20.0, 43.0, 12.0, 30.0):
        fp.observe(solo, 17.0 + 0.83 * solo)
    assert fp.fixed == pytest.approx(17.0) and fp.slope == pytest.approx(0.83) and fp.margin == pytest.approx(0.0)
    assert fp.price(10.0) == pytest.approx(25.3)
    assert fp.observe(10.0, 25.3 * 1.1) == pytest.approx(1.1)  # measured / the price before


def test_one_chunk_size_gives_its_excess_with_slope_one_and_noise_a_margin():
    fp = FusedPrice(warmup=10, quantile=0.9)
    served = [23.0, 23.5, 22.5, 23.0, 24.0, 23.0, 22.0, 23.0, 23.0, 33.0]
    for m in served:
        fp.observe(7.0, m)
    assert fp.slope == 1.0 and fp.fixed == pytest.approx(16.0)  # median excess
    assert fp.margin == pytest.approx(1.9)  # P90 of residuals (33 - 23 = 10 at the top, then 1.0)
    assert fp.price(7.0) == pytest.approx(24.9)


def test_no_margin_from_fewer_residuals_than_the_warm_up():
    """An H100's first three fused iterations (a warm-up extend among them) made a 12 ms P90
    margin, and no chunk fitted a TBT budget again: the margin waits for ``warmup`` of them."""
    fp = FusedPrice(warmup=8, quantile=0.9)
    for m in (28.0, 9.9, 12.9):
        fp.observe(7.0, m)
    assert fp.margin == 0.0 and fp.fixed == pytest.approx(5.9)  # the median excess alone
    for m in (13.0, 12.5, 13.5, 12.0, 14.0):
        fp.observe(7.0, m)
    assert fp.margin > 0.0


def test_refits_only_every_refit_after_the_warm_up_and_glitches_are_dropped():
    fp = FusedPrice(warmup=2, refit=4)
    fp.observe(10.0, 20.0)
    fp.observe(10.0, 20.0)
    assert fp.price(10.0) == pytest.approx(20.0)
    fp.observe(10.0, 40.0)  # third: no refit yet
    assert fp.price(10.0) == pytest.approx(20.0)
    fp.observe(10.0, 40.0)  # fourth: refit
    assert fp.price(10.0) > 20.0
    assert fp.observe(10.0, 500.0) is None and fp.observe(10.0, 1.0) is None and fp.observe(0.0, 5.0) is None
    with pytest.raises(ValueError, match="bad FusedPrice settings"):
        FusedPrice(window=1)


def test_learned_after_the_warm_up_or_when_known():
    fp = FusedPrice(warmup=3)
    for i in range(3):
        assert not fp.learned
        fp.observe(10.0 + i, 20.0 + i)
    assert fp.learned and not fp.known
    assert FusedPrice(known=True).learned
    held = FusedPrice(prior_holds=True)
    assert held.learned and not held.known  # acted on in full from the start, and still learned
    for _ in range(held.refit):
        held.observe(10.0, 30.0)
    assert held.price(10.0) == pytest.approx(30.0)


def test_a_prior_that_holds_is_kept_through_a_warm_up_until_refit_iterations():
    """The served warm-up's tiny batches (an H100: 1 token at 2.2x its price, 64 at 0.5x) do not
    move a held prior; at ``refit`` iterations the fit takes over."""
    fp = FusedPrice(warmup=8, refit=32, prior_holds=True)
    for solo, m in [(7.0, 15.4), (7.2, 3.7), (7.2, 5.0), (8.0, 11.4)] * 2:
        fp.observe(solo, m)
    assert fp.price(30.0) == 30.0 and fp.to_dict() == {"fixed_ms": 0.0, "slope": 1.0, "ratio": 0.0, "margin_ms": 0.0}
    for i in range(24):
        fp.observe(20.0 + i, 1.1 * (20.0 + i))
    assert fp.slope != 1.0 and fp.price(30.0) > 30.0


def test_a_fit_with_a_negative_intercept_is_refitted_through_the_origin():
    """Served = 1.10 x base with a spread that puts the least-squares intercept below zero: the
    slope is the one through the origin, not the steeper one beside a clipped intercept."""
    fp = FusedPrice(warmup=4, refit=100, quantile=0.5)
    for base, m in ((12.0, 12.6), (20.0, 21.5), (31.0, 34.1), (36.0, 40.0)):
        fp.observe(base, m)
    import numpy as np

    x, y = np.array([12.0, 20.0, 31.0, 36.0]), np.array([12.6, 21.5, 34.1, 40.0])
    assert np.polyfit(x, y, 1)[1] < 0
    assert fp.slope == pytest.approx(x @ y / (x @ x)) and fp.slope < np.polyfit(x, y, 1)[0]


def test_one_cluster_of_chunk_sizes_prices_a_larger_chunk_at_its_ratio_not_a_flattened_slope():
    """An H200 serving code: 1,024-token chunks (base 24-29 ms) at 1.09 x base with noise that
    least squares reads as a slope of 0.59 (1.09 in truth); a 2,048-token chunk (base 44 ms)
    priced on that slope ran over it. A spread this narrow fits no slope: the price is the higher
    of the median excess and the median ratio, here the ratio's 1.09 x 44."""
    import numpy as np

    xs = [24.0, 25.0, 26.0, 27.0, 28.0, 29.0] * 6
    ys = [1.09 * x - 0.5 * (x - 26.5) for x in xs]
    assert np.polyfit(xs, ys, 1)[0] == pytest.approx(0.59)
    fp = FusedPrice(warmup=8, refit=36, quantile=0.9, prior_holds=True)
    for x, y in zip(xs, ys):
        fp.observe(x, y)
    ratio = float(np.median(np.array(ys) / np.array(xs)))
    assert fp.slope == 1.0 and fp.ratio == pytest.approx(ratio) and ratio == pytest.approx(1.0902, abs=1e-4)
    resid = np.array(ys) - np.maximum(np.array(xs) + fp.fixed, ratio * np.array(xs))
    assert fp.margin == pytest.approx(np.quantile(resid, 0.9))
    assert fp.price(44.0) == pytest.approx(ratio * 44.0 + fp.margin)
    assert fp.price(44.0) > 1.08 * 44.0 > 0.59 * 44.0 + np.polyfit(xs, ys, 1)[1]
    wide = FusedPrice(warmup=8, refit=36, prior_holds=True)  # chunks of 10-44 ms base: a slope is fitted
    for x in [10.0, 20.0, 30.0, 44.0] * 9:
        wide.observe(x, 1.09 * x)
    assert wide.slope == pytest.approx(1.09) and wide.ratio == 0.0 and wide.price(44.0) == pytest.approx(47.96)


# Session 44's H100, the capped conversation at TBT 30: the hybrid's first 32 fused iterations
# (base price, measured ms; bench/results/x4_s44_2026-11-27/cap30lo/, where price = base until the
# first refit). The first is the server's warm-up, a one-token batch.
SERVED_FIRST_32 = [(9.34, 53.27), (9.34, 13.9), (9.34, 15.14), (24.43, 24.27), (19.87, 20.63), (24.55, 24.41),
                   (25.8, 26.07), (26.63, 26.79), (27.46, 27.87), (28.29, 30.08), (29.12, 32.08), (25.12, 27.25),
                   (25.97, 27.29), (26.8, 28.69), (26.08, 28.99), (16.91, 21.66), (24.15, 24.44), (23.94, 24.58),
                   (23.18, 25.62), (23.81, 26.1), (24.45, 27.05), (23.46, 29.36), (24.01, 29.73), (22.84, 24.94),
                   (17.29, 16.73), (22.8, 23.65), (23.93, 24.39), (23.16, 25.6), (23.8, 26.54), (22.86, 28.73),
                   (23.41, 28.99), (23.96, 29.38)]


# Session 51's 4 x H200, the Llama-3.1-70B shape at TP 2, the capped conversation at TBT 100: the
# hybrid's first 32 fused iterations (bench/results/h200x4_s51_2026-11-28/cap70/). The first three are
# the server's warm-up batches (1, 64 and 65 tokens).
SERVED_70B_FIRST_32 = [(30.46, 93.59), (31.96, 50.43), (32.44, 56.22), (85.98, 85.6), (87.11, 85.95), (87.73, 85.87),
                       (98.5, 100.3), (99.19, 98.12), (99.87, 100.01), (90.43, 88.32), (91.05, 89.69), (91.68, 92.74),
                       (92.3, 102.59), (41.48, 35.11), (96.91, 93.3), (98.09, 97.02), (88.64, 85.03), (89.27, 86.24),
                       (89.89, 86.68), (90.52, 87.16), (91.14, 88.89), (91.76, 92.32), (92.39, 99.53), (96.76, 110.5),
                       (87.61, 90.44), (88.23, 87.53), (88.85, 87.69), (89.45, 86.54), (90.07, 87.35), (83.24, 81.84),
                       (52.01, 45.61), (72.55, 82.65)]


def test_a_few_warm_up_batches_far_from_one_cluster_of_chunks_do_not_make_a_spread():
    """Served, P10 to P90 counted the three warm-up batches as a spread, and least squares through
    them gave 32.5 ms + 0.62 x: an 85-ms chunk priced 94.6 ms with its margin, a 40-ms one 66.6. On
    the middle half the chunks are one cluster: the narrow form, the chunks' median ratio."""
    import numpy as np

    x, y = np.array(SERVED_70B_FIRST_32).T
    assert np.quantile(x, 0.9) - np.quantile(x, 0.1) >= 0.25 * np.median(x)  # the old test passed
    fp = FusedPrice(prior_holds=True)
    for a, b in SERVED_70B_FIRST_32:
        fp.observe(a, b)
    assert fp.slope == 1.0 and fp.ratio == pytest.approx(float(np.median(y / x))) and 0.95 < fp.ratio < 1.05
    assert fp.price(40.0) < 55.0 and fp.price(85.0) - fp.margin == pytest.approx(max(85.0 + fp.fixed, fp.ratio * 85.0))


def test_an_outlier_that_pulls_the_slope_out_of_bounds_gives_the_ratio_form_not_a_clamped_fixed_part():
    """Clamped at 0.5, the served fit was 14.1 ms + 0.5 x: a 10-ms chunk priced at 22.5 ms with its
    margin, where such iterations ran at ~1.06 x; the hybrid stopped fusing for the rest of the run."""
    import numpy as np

    x, y = np.array(SERVED_FIRST_32).T
    assert np.polyfit(x, y, 1)[0] < 0.5  # the warm-up batch drags the least-squares slope to 0.18
    fp = FusedPrice(prior_holds=True)
    for a, b in SERVED_FIRST_32:
        fp.observe(a, b)
    ratio = float(np.median(y / x))
    assert fp.slope == 1.0 and fp.ratio == pytest.approx(ratio) and 1.0 < ratio < 1.1
    assert fp.fixed == pytest.approx(float(np.median(y - x)))
    assert fp.price(10.0) < 16.0 < 22.5  # the clamped fit's price of the same chunk


def test_graph_cliffs_are_the_sizes_a_larger_one_beats_and_by_how_much():
    gemm = {256: 6.6, 288: 8.6, 320: 7.9, 448: 13.9, 480: 9.8, 512: 9.7, 576: 11.6}
    assert graph_cliffs(sorted(gemm), gemm.__getitem__) == pytest.approx({288: 0.7, 448: 4.2, 480: 0.1})
    assert graph_cliffs([256, 512], {256: 5.0, 512: 5.0}.__getitem__) == {256: 0.0}  # as long: no gain in filling less
    assert graph_cliffs([], gemm.__getitem__) == {}


def test_base_of_inverts_the_price_a_timeline_row_recorded():
    ratio = {"fixed_ms": 0.0, "slope": 1.0, "ratio": 1.1, "margin_ms": 2.0}  # price = 1.1 x base + 2
    line = {"fixed_ms": 3.0, "slope": 1.0, "ratio": 0.0, "margin_ms": 1.0}   # price = base + 3 + 1
    assert FusedPrice.base_of(24.0, ratio) == pytest.approx(20.0)
    assert FusedPrice.base_of(24.0, line) == pytest.approx(20.0)
    both = {"fixed_ms": 3.0, "slope": 1.0, "ratio": 1.1, "margin_ms": 0.0}  # max(b + 3, 1.1 b): 1.1 b past 30
    assert FusedPrice.base_of(22.0, both) == pytest.approx(19.0) and FusedPrice.base_of(44.0, both) == pytest.approx(40.0)
    assert math.isnan(FusedPrice.base_of(1.0, line))
    p = FusedPrice()
    p.fixed, p.slope, p.ratio, p.margin = 3.0, 1.0, 1.1, 0.5
    assert FusedPrice.base_of(p.price(25.0), p.to_dict()) == pytest.approx(25.0, abs=1e-3)


def test_a_padded_size_that_runs_over_the_line_more_than_the_rest_is_priced_up_by_the_excess():
    """Served on a lone H100, 512-token batches ran under their base price and 640-token ones 1.1 x
    over it. The line over both (1.1 ms + base; residuals -1.6 and +1.6, their median 0, P90 1.6)
    prices 640 low at the median; that size is priced up by its excess, 512 is not priced down."""
    fp = FusedPrice(warmup=8, refit=32, prior_holds=True)
    for _ in range(16):
        fp.observe(24.0, 23.5, 512)
        fp.observe(27.0, 29.7, 640)
    assert fp.slope == 1.0 and fp.fixed == pytest.approx(1.1) and fp.margin == pytest.approx(1.6)
    assert fp.bias == pytest.approx({640: 1.6})
    assert fp.price(27.0, 640) == pytest.approx(28.1 + 1.6 + 1.6) and fp.price(24.0, 512) == pytest.approx(25.1 + 1.6)
    assert fp.price(27.0) == pytest.approx(29.7) and fp.price(27.0, 768) == pytest.approx(29.7)  # no size of its own
    assert fp.to_dict(640)["bias_ms"] == pytest.approx(1.6) and "bias_ms" not in fp.to_dict()
    assert FusedPrice.base_of(fp.price(27.0, 640), fp.to_dict(640)) == pytest.approx(27.0, abs=1e-2)


def test_a_size_seen_fewer_times_than_its_minimum_keeps_the_line():
    from sglang_mux.fused_price import SIZE_MIN_OBS
    fp = FusedPrice(warmup=8, refit=8, prior_holds=True)
    for i in range(8 * (SIZE_MIN_OBS - 1)):
        fp.observe(24.0, 27.0 if i % 8 == 0 else 25.0, 704 if i % 8 == 0 else 512)  # 704: one batch in eight, 2 ms over
    assert fp.bias == {}
    fp.observe(24.0, 27.0, 704)  # the minimum reached, and refitted at the next multiple of 8
    for _ in range(7):
        fp.observe(24.0, 25.0, 512)
    assert fp.bias == pytest.approx({704: 2.0})


def test_captured_size_is_the_size_a_batch_runs_at_or_none_eagerly():
    from sglang_mux.fused_price import captured_size
    graph = (4, 8, 16, 512, 576)
    assert [captured_size(t, graph) for t in (3, 8, 9, 500, 512, 513)] == [4, 8, 16, 512, 512, 576]
    assert captured_size(577, graph) is None and captured_size(0, graph) is None  # past the graph; empty
    assert captured_size(200, graph) is None and captured_size(300, graph) == 512  # 512 is over twice 200: eager
    assert captured_size(8, ()) is None


def test_the_base_price_is_recovered_from_the_state_that_priced_it():
    state = FusedPrice()
    state.fixed, state.slope, state.margin = 2.0, 1.1, 0.5
    narrow = FusedPrice()
    narrow.fixed, narrow.ratio, narrow.margin = 3.0, 1.2, 0.4  # 1.2 x base above 15 ms, base + 3 below
    for fp in (state, narrow):
        for base in (5.0, 15.0, 40.0):
            assert FusedPrice.base_of(fp.price(base), fp.to_dict()) == pytest.approx(base)
