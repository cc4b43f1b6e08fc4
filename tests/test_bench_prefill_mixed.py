"""bench.prefill_mixed's fused batches: what a fused iteration holds (CPU; the timing needs a GPU)."""

from bench.prefill_mixed import CHUNKS, DECODE_ROWS, fused_batches


def test_fused_batches_are_a_chunk_and_decode_rows():
    batches = fused_batches(seed=0, count=60)
    assert batches == fused_batches(seed=0, count=60)  # seeded: a rerun times the same batches
    for b in batches:
        pieces = [x for x in b if x[0] > 1]
        rows = b[len(pieces):]
        assert 1 <= len(pieces) <= 3 and sum(n for n, _ in pieces) in CHUNKS
        assert all(r == 0 for _, r in pieces[1:])  # only the first piece continues a request
        assert len(rows) in DECODE_ROWS and all(n == 1 and 200 <= c <= 8000 for n, c in rows)
        assert sum(c for _, c in rows) <= 200_000 + 200 * len(rows)  # fits the harness's KV pool
    assert {len(b) - sum(1 for x in b if x[0] > 1) for b in batches} == set(DECODE_ROWS)


def test_fused_grid_covers_chunk_rows_and_context():
    from bench.prefill_mixed import GRID_CONTEXTS, GRID_ROWS, fused_grid

    grid = fused_grid()
    cells = {(b[0][0], len(b) - 1, b[1][1]) for b in grid}
    assert len(cells) == len(grid) == 45  # 5 chunks x 5 row counts x 2 contexts, less 128 x 4000 (512K tokens)
    assert {c for c, _, _ in cells} == set(CHUNKS) and {r for _, r, _ in cells} == set(GRID_ROWS)
    assert {x for _, _, x in cells} == set(GRID_CONTEXTS) and (4096, 128, 4000) not in cells


def test_fused_size_grid_fills_every_captured_size_the_hybrid_fills():
    from bench.prefill_mixed import SIZE_PREFIXES, SIZE_ROWS, fused_size_grid

    grid = fused_size_grid()
    totals = sorted({sum(n for n, _ in b) for b in grid})
    assert totals == [256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 832, 896, 960, 1024]
    assert len(grid) == len(totals) * len(SIZE_ROWS) * len(SIZE_PREFIXES)
    for b in grid:
        (n, p), rows = b[0], b[1:]
        assert n > 1 and p in SIZE_PREFIXES and len(rows) in SIZE_ROWS and all(x == (1, 4000) for x in rows)


def test_fused_sizes_is_a_kind_of_fused_run(capsys):
    import pytest

    from bench.prefill_mixed import main

    with pytest.raises(SystemExit):
        main(["--fused-sizes", "--model-config", "x", "--table", "y", "--out", "z"])
    assert "add --fused" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--fused", "--fused-sizes", "--fused-grid", "--model-config", "x", "--table", "y", "--out", "z"])
    assert "not both" in capsys.readouterr().err
