"""bench.analysis.sim_hybrid_map: a generated workload's point is the very point bench.run sends."""
from pathlib import Path

import pytest

from bench import run
from bench.analysis import sim_hybrid_map as M


@pytest.mark.parametrize("name,rate", [("code", 15.5), ("chat-1k", 4)])
def test_a_generated_point_is_bench_runs(tmp_path, name, rate):
    w = dict(M.WORKLOADS[name], span=10)  # a short point: the same rules
    reqs = M.requests(w, rate, None, tmp_path)
    a = run.parse_args(["--systems", "stub", "--workload", name, "--rates", f"{rate:g}", "--duration-s", "10",
                        "--out", str(tmp_path / "o")])
    point = run.build_workload(a, rate)
    assert len(reqs) == len(point.requests) == round(rate * 10)
    assert [(q.n_input, q.output_len) for q in reqs] == [(r.prompt_len, r.max_new_tokens) for r in point.requests]
    assert [q.arrival_s for q in reqs] == pytest.approx([r.t for r in point.requests], abs=1e-12)
    assert not any(q.reused for q in reqs)


@pytest.mark.parametrize("name,rate", [("mixed", 0.8), ("loogle", 0.45)])
def test_a_long_prompt_point_is_the_one_the_plan_serves(tmp_path, name, rate):
    """The served points of bench/plans/long_prompts.sh (its --duration-s, stretched by bench.run to
    100 requests under the length-aware rule): the same prompts at the same times, as
    2026-12-06's served mixed point at 0.8 req/s needed to be replayed."""
    w = M.WORKLOADS[name]
    plan = (Path(__file__).resolve().parents[1] / "bench/plans/long_prompts.sh").read_text()
    assert f"--duration-s {w['span']:g} " in plan
    reqs = M.requests(w, rate, None, tmp_path)
    a = run.parse_args(["--systems", "stub", "--workload", name, "--rates", f"{rate:g}", "--duration-s",
                        f"{w['span']:g}", "--ttft-slo-ms-per-token", "0.2", "--out", str(tmp_path / "o")])
    point = run.build_workload(a, rate)
    assert len(reqs) == len(point.requests) == 100
    assert [(q.n_input, q.output_len) for q in reqs] == [(r.prompt_len, r.max_new_tokens) for r in point.requests]
    assert [q.arrival_s for q in reqs] == pytest.approx([r.t for r in point.requests], abs=1e-9)


def test_the_h100_points_are_on_their_workloads_grids():
    for name, rate in M.H100_POINTS:
        assert rate in M.WORKLOADS[name]["rates"]


def test_help(capsys):
    with pytest.raises(SystemExit) as e:
        M.main(["--help"])
    assert e.value.code == 0 and "--json" in capsys.readouterr().out


def test_a_span_replaces_each_chosen_workloads_own():
    from bench.analysis.sim_hybrid_map import WORKLOADS, chosen_workloads

    name = "uncapped conversation (1 session in 20)"
    got = chosen_workloads((name,), 300.0)
    assert list(got) == [name] and got[name]["span"] == 300.0 and WORKLOADS[name]["span"] == 90
    assert chosen_workloads((name,))[name] is WORKLOADS[name]  # no span: the workload's own
    assert len(chosen_workloads()) == len(WORKLOADS)


def test_queue_drift_goes_to_the_length_aware_cells_only():
    from bench.analysis.sim_hybrid_map import WORKLOADS, chosen_workloads

    got = chosen_workloads(None, None, queue_drift=True)
    length = {k for k, w in WORKLOADS.items() if w["ttft"][0] == "length"}
    assert length == {"uncapped conversation (1 session in 20)", "loogle", "mixed"}
    assert {k for k, w in got.items() if w.get("drift") == "queue"} == length
    assert all("drift" not in w for w in chosen_workloads().values())  # bench.run's test by default


def test_fused_jitter_reaches_the_hybrids_fused_iterations_through_a_walk(tmp_path):
    """run_cell passes ``fused_jitter`` to the mux: with fused iterations at 1.5x their price the
    hybrid learns the dearer price and takes smaller chunks, and its TTFT rises; chunked prefill,
    priced by its own calibration, is left as it was."""
    inputs = M.simulator_inputs()
    w = dict(M.WORKLOADS["code"], span=10, rates=(15.5,))
    (_, (plain,)), (_, (slow,)) = (M.run_cell(*inputs, w, 50.0, "hybrid", tmp_path, **kw)
                                   for kw in ({}, {"fused_jitter": [1.5]}))
    assert slow["ttft_p99_s"] > plain["ttft_p99_s"] and slow["tbt_p99_ms"] <= 50.0
    c0, c1 = (M.run_cell(*inputs, w, 50.0, "chunked 512 + mixed", tmp_path, **kw)[1][0]
              for kw in ({}, {"fused_jitter": [1.5]}))
    assert c0 == c1


def test_cli_fused_jitter_needs_a_hybrid_timeline(tmp_path, capsys):
    tl = tmp_path / "t.jsonl"
    tl.write_text('{"reason": "decode-only", "measured_decode_ms": 20.0, "t_decode_worst_ms": 20.0}\n')
    with pytest.raises(SystemExit):
        M.main(["--fused-jitter", str(tl)])
    assert "--fused-jitter" in capsys.readouterr().err


def test_a_map_with_fused_jitter_draws_the_fused_host_time_from_the_same_timeline(tmp_path, monkeypatch):
    """With --fused-jitter the hybrid's fused iterations take that timeline's measured / base ratios
    and, as host time, its fused gaps less their measured time, in place of the workload's fixed
    2 ms: the fixed term had the map pessimistic at TBT 50 where served cells were level."""
    from bench.analysis.whatif_fused_tail import fused_hosts
    from sglang_mux import sim

    tl = "bench/results/h200x4_s52_2026-11-28/cap70/mux-hybrid.timeline.jsonl.xz"
    seen = []
    monkeypatch.setattr(M, "simulator_inputs", lambda table: ("est", "jit", "host", "corun"))
    monkeypatch.setattr(M, "run_cell", lambda *a, **kw: (seen.append((a[6], kw)), (None, []))[1])
    M.build_map(tmp_path / "m.json", M.TABLE, ("capped conversation (<= 8000)",), (50.0,), seed=1, fused_jitter=tl)
    assert [name for name, _ in seen] == list(M.SYSTEMS)
    kw = seen[0][1]
    assert kw["fused_host"] == list(fused_hosts(tl)) and list(kw["fused_jitter"]) == list(sim.fused_jitter(tl))
    seen.clear()
    M.build_map(tmp_path / "m.json", M.TABLE, ("capped conversation (<= 8000)",), (50.0,), seed=1)
    assert all(kw == {} for _, kw in seen)  # the workload's own fixed host time (run_point's default)


@pytest.mark.parametrize("name,k", [("loogle", 0.2), ("uncapped conversation (1 session in 20)", 0.2), ("code", None)])
def test_the_mux_is_told_a_length_aware_cells_ttft_rule(tmp_path, monkeypatch, name, k):
    """As the served plans pass ``--mux-ttft-ms-per-token``, the simulated mux of a length-aware cell
    decides preemption on each prompt's own deadline (told only the flat 2 s, a long prompt had
    missed its own already and was never preempted: loogle's hybrid 0.2 req/s, told, 0.35); a
    flat cell's mux is told nothing more."""
    seen = {}

    class Stop(Exception):
        pass

    def run_policies(reqs, est, policy, calib, **kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(M.sim, "run_policies", run_policies)
    w = dict(M.WORKLOADS[name], span=20)
    with pytest.raises(Stop):
        M.run_point("est", [1.0], ([1.0], [1.0]), 1.0, w, 50.0, "hybrid", w["rates"][0], tmp_path)
    assert seen["slo"].ttft_ms_per_token == (k or 0.0) and seen["slo"].ttft_ms == w["ttft"][1] * 1e3
    # and the longest prompt its served server's memory holds in one layer-wise prefill
    assert seen.get("layerwise_max_tokens") == (None if name == "code" else M.LAYERWISE_MAX_8B_H100)


def test_a_prompt_past_the_layerwise_limit_is_fused_in_chunks():
    """As the served hybrid does (`prefill_memory`): a 40K-token prompt alone runs layer-wise on
    the whole GPU; past a 20K limit it runs as fused chunks only."""
    from sglang_mux import sim

    est = M.simulator_inputs()[0]
    reqs = [sim.TraceReq("a", 0.0, 40_000, 4, 0), sim.TraceReq("b", 0.5, 2_000, 4, 0)]
    free, capped = (sim.run_policies(reqs, est, "hybrid", prefill_graph=True, layerwise_max_tokens=lw)[0].summary["reasons"]
                    for lw in (None, 20_000))
    assert free["prefill-only"] > 0
    assert "prefill-only" not in capped and "best-fit" not in capped and capped["fused"] >= 40_000 // 4096


def test_another_tables_map_is_told_its_servers_layerwise_limit(monkeypatch, capsys):
    """The limit is the served GPU's memory, not the table's: a map on the H200 table with a
    long-context cell must be given it (or none); a cell without one needs nothing; the H100 table
    keeps the measured 8B limit. What is given reaches the long-context cells only."""
    built = []
    monkeypatch.setattr(M, "build_map", lambda *a: built.append(a))
    h200 = ["--table", "llama-3.1-8b__nvidia-h200__fa3"]
    with pytest.raises(SystemExit) as e:
        M.main(h200 + ["--workloads", "code,loogle"])
    assert e.value.code == 2 and "--layerwise-max" in capsys.readouterr().err and not built
    M.main(h200 + ["--workloads", "code"])
    M.main(h200 + ["--workloads", "loogle", "--layerwise-max", "none"])
    M.main(h200 + ["--workloads", "loogle", "--layerwise-max", "212,000"])
    M.main(["--workloads", "loogle"])
    assert [a[-2] for a in built] == [M.LAYERWISE_MAX_8B_H100, None, 212_000, M.LAYERWISE_MAX_8B_H100]
    assert [a[-1] for a in built] == [False] * 4  # --fcfs-prefill not given: the servers' deadline order
    with pytest.raises(SystemExit):
        M.main(h200 + ["--layerwise-max", "-5"])
    assert "positive token count" in capsys.readouterr().err
    w = M.chosen_workloads(("code", "loogle"), layerwise_max=212_000)
    assert w["loogle"]["layerwise_max"] == 212_000 and "layerwise_max" not in w["code"]
    assert M.chosen_workloads(("loogle",), layerwise_max=None)["loogle"]["layerwise_max"] is None


def test_the_served_mixed_point_that_failed_replays_and_passes(tmp_path):
    """Served on an H100 (long_prompts_h100_b_2026-12-06) at 0.8 req/s, the hybrid held mixed-48,
    -49 and -50 (90, 67 and 24 tokens) 2.6-3.5 s behind an 81,000-token prompt (mixed-46). In the
    replay that prompt runs layer-wise and is preempted by mixed-47; resumed, it is preempted
    again for them (MuxWise forbids only preempting the preemptor), and the point passes."""
    from sglang_mux import sim
    from sglang_mux.policy import SLO

    est, jit, host, corun = M.simulator_inputs(M.TABLE)
    w = M.WORKLOADS["mixed"]
    reqs = M.requests(w, 0.8, w["pools"][0], tmp_path)
    assert [reqs[i].n_input for i in (46, 47, 48, 49, 50)] == [81000, 152, 90, 67, 24]
    calib = sim.Calibration(jitter=jit, prefill_slowdown=corun, host_draws=host, fused_host_ms=w["fused_host"])
    r = sim.run_policies(reqs, est, "hybrid", calib, slo=SLO(50, 2000, 0.2), online_guard=True, seed=0,
                         prefill_graph=True, layerwise_max_tokens=w["layerwise_max"])[0]
    wait = [r.ttft_s[i] - 0.2e-3 * reqs[i].n_input for i in (48, 49, 50)]
    assert max(wait) < 2.0
    assert sum(n for k, n in r.summary["reasons"].items() if k.startswith("preempt+")) > 2  # mixed-47's and more
    assert M.ttft_p99(r, reqs, w["ttft"]) < 2.0
