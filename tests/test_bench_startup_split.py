"""bench.analysis.startup_split: a server's start cut into its phases from its log and start.json."""
import json
import lzma

import pytest

from bench.analysis import startup_split as S

LOG = """[2026-12-06 05:36:08] Failed to load generation config for /m
[2026-12-06 05:36:13] No chat template found
[2026-12-06 05:36:44] green-context partitions on 132 SMs: D16/P116, ...
[2026-12-06 05:36:45] Init torch distributed begin.
[2026-12-06 05:36:48] Memory pool end. avail mem=10.63 GB
Capturing batches (bs=256 avail_mem=10.1 GB): 100%|
[2026-12-06 05:36:57] Capture target prefill CUDA graph end. elapsed=8.37 s
[2026-12-06 05:37:19] Capture target decode CUDA graph end. elapsed=22.59 s
[2026-12-06 05:37:21] The server is fired up and ready to roll!
[2026-12-06 05:37:22] Cache flushed successfully!
[2026-12-06 05:40:00] Init torch distributed begin.
"""


def test_a_start_is_cut_at_its_log_lines_and_the_launch_is_ready_less_its_time():
    s = S.split(LOG, 105.3)  # served 2026-12-06: launched 105.3 s before "ready"
    assert s == pytest.approx({"imports": 32.3, "scheduler": 37, "weights": 3, "prefill graph": 9,
                               "decode graphs": 22, "ready": 2})
    assert sum(s.values()) == pytest.approx(105.3)
    no_graph = "\n".join(x for x in LOG.splitlines() if "prefill CUDA graph" not in x)
    assert "prefill graph" not in S.split(no_graph, 105.3) and S.split(no_graph, 105.3)["decode graphs"] == 31
    assert S.split(LOG.split("[2026-12-06 05:37:21]")[0], 105.3) is None  # never ready


def test_the_command_reads_kept_runs(tmp_path, capsys):
    run = tmp_path / "startup"
    run.mkdir()
    (run / "mux-hybrid.log.xz").write_bytes(lzma.compress(LOG.encode()))
    (run / "mux-hybrid__start.json.xz").write_bytes(lzma.compress(json.dumps({"startup_s": 105.3}).encode()))
    (run / "other__start.json").write_text(json.dumps({"startup_s": 60.0}))  # its log was not kept
    assert S.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert f"| {tmp_path.name}/startup | mux-hybrid | 105.3 | 32 | 37 | 3 | 9 | 22 | 2 |" in out and "other" not in out
    with pytest.raises(SystemExit):
        S.main([str(tmp_path / "none")])
