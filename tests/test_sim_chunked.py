"""sglang_mux.sim_chunked: SGLang's chunked prefill with the estimator playing the GPU."""

import json

import pytest

from sglang_mux import sim, sim_chunked
from sglang_mux.estimator import PrefillReq
from sglang_mux.policy import SoloOnlyEstimator


class FakeEstimator(SoloOnlyEstimator):
    total_sms = 132

    def prefill_ms(self, p, reqs):
        return sum(0.01 * q.n + 1e-4 * q.r for q in reqs) + 2.0

    def decode_solo_ms(self, d, bs, sum_reused, max_reused=None):
        return 5.0 + 0.1 * bs + 1e-4 * sum_reused


def test_a_prompt_is_cut_into_budget_chunks_with_its_prefix_as_context():
    est = FakeEstimator()
    r = sim_chunked.simulate_chunked([sim.TraceReq("a", 0.0, 1000, 3, 0)], est, budget=512, host_ms=1.0)
    chunks = est.prefill_ms(132, [PrefillReq(512, 0)]) + est.prefill_ms(132, [PrefillReq(488, 512)]) + 2.0
    assert r.ttft_s[0] == pytest.approx(chunks / 1e3)  # first token after the last chunk
    fin = chunks + est.decode_solo_ms(132, 1, 1001) + est.decode_solo_ms(132, 1, 1002) + 2.0
    assert r.finish_s[0] == pytest.approx(fin / 1e3)
    assert r.summary["tbt_p99_ms"] == pytest.approx(est.decode_solo_ms(132, 1, 1002) + 1.0)


def test_mixed_chunks_carry_the_decode_batch_and_unmixed_ones_stall_it():
    est = FakeEstimator()
    reqs = [sim.TraceReq("a", 0.0, 100, 2, 0), sim.TraceReq("b", 0.0005, 3000, 1, 0)]  # one gap: a's
    mixed = sim_chunked.simulate_chunked(reqs, est, budget=1000)
    # b's first chunk runs as one extend batch with a's decode token (context 101), which counts
    # in the budget as SGLang counts it
    step = est.prefill_ms(132, [PrefillReq(999, 0), PrefillReq(1, 101)])
    t_a = est.prefill_ms(132, [PrefillReq(100, 0)])
    assert mixed.summary["tbt_p99_ms"] == pytest.approx(step)
    alone = sim_chunked.simulate_chunked(reqs, est, budget=1000, mixed=False)
    # unmixed: a waits while b's three chunks run, so its one gap spans them and its own step
    chunks = sum(est.prefill_ms(132, [PrefillReq(1000, r)]) for r in (0, 1000, 2000))
    assert alone.summary["tbt_p99_ms"] == pytest.approx(chunks + est.decode_solo_ms(132, 1, 101))
    assert alone.ttft_s[1] < mixed.ttft_s[1]  # ... and b's prompt gets there sooner
    assert mixed.ttft_s[0] == alone.ttft_s[0] == pytest.approx(t_a / 1e3)
    assert "ttft_drift" in mixed.summary


def test_decode_rows_that_fill_the_budget_hold_prompts_back_and_the_graph_pads():
    """SGLang's PrefillAdder takes a mixed chunk's decode rows from the chunk budget: three decoding
    requests leave a 4-token budget one prompt token; unmixed, the budget is the prompt's. Through
    the prefill graph SGLang captures up to the budget, a batch is priced at its padded size."""
    from sglang_mux.estimator import Estimator
    from sglang_mux.tables import resolve_table

    est = FakeEstimator()
    reqs = [sim.TraceReq(k, 0.0, 1, 3, 0) for k in "abc"] + [sim.TraceReq("d", 0.001, 2, 2, 0)]
    mixed = sim_chunked.simulate_chunked(reqs, est, budget=4)
    alone = sim_chunked.simulate_chunked(reqs, est, budget=4, mixed=False)
    assert mixed.summary["iterations"] == 4 and alone.summary["iterations"] == 4
    assert mixed.ttft_s[3] > alone.ttft_s[3]  # d waits for room beside the rows
    real = Estimator.from_table(resolve_table("llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"))
    r = sim_chunked.simulate_chunked([sim.TraceReq("a", 0.0, 1000, 1, 0)], real, budget=1024)
    padded = real.fused_model.ms(1024, 0, 1000 * 1000, 0)  # 1000 tokens run as 1024 (the table's fused model)
    assert r.ttft_s[0] == pytest.approx(padded / 1e3) and padded != real.fused_ms([PrefillReq(1000, 0)], [])
    assert real.graph_tokens == ()  # the caller's estimator is left as it was


def test_cli_prints_json_and_rejects_bad_budgets(capsys):
    sim_chunked.main(["--trace", "conversation", "--limit", "20", "--rate", "2", "--json", "--budget", "256"],
                     estimator=FakeEstimator())
    out = json.loads(capsys.readouterr().out)
    assert out["results"][0]["policy"] == "chunked-256" and out["results"][0]["requests"] == 20
    with pytest.raises(SystemExit):
        sim_chunked.main(["--budget", "0"], estimator=FakeEstimator())
    assert "--budget" in capsys.readouterr().err
    with pytest.raises(ValueError, match="budget"):
        sim_chunked.simulate_chunked([sim.TraceReq("a", 0.0, 10, 2, 0)], FakeEstimator(), budget=0)


def test_cli_missing_table_is_a_usage_error(tmp_path, capsys):
    table = str(tmp_path / "no_such_table")
    with pytest.raises(SystemExit) as exc:
        sim_chunked.main(["--table", table, "--trace", "conversation", "--limit", "5", "--rate", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {table}: no such table directory") and err.count("\n") == 1


def test_a_mixed_iteration_is_priced_by_the_estimators_fused_ms():
    """One price for a fused iteration (Estimator.fused_ms): the policy and both simulators."""
    calls = []

    class Fused(FakeEstimator):
        def fused_ms(self, pieces, decode_contexts):
            calls.append((list(pieces), list(decode_contexts)))
            return 7.0

    reqs = [sim.TraceReq("a", 0.0, 100, 2, 0), sim.TraceReq("b", 0.0005, 3000, 1, 0)]
    r = sim_chunked.simulate_chunked(reqs, Fused(), budget=1000)
    assert calls[0] == ([PrefillReq(100, 0)], []) and calls[1] == ([PrefillReq(999, 0)], [101])
    assert r.summary["tbt_p99_ms"] == pytest.approx(7.0) and r.ttft_s[0] == pytest.approx(7e-3)


def test_the_capped_baseline_lets_short_prompts_into_every_step_and_one_long_one_at_a_time():
    """cap=512 with a 2048 budget (bench.capped_prefill): a 3,000-token prompt takes 512 tokens a
    step; a 100-token one behind it runs whole in the first step, and a second long one waits for
    the first to finish, then starts at 512. Uncapped, the first long prompt fills whole steps."""
    est = FakeEstimator()
    reqs = [sim.TraceReq("long", 0.0, 3000, 1, 0), sim.TraceReq("short", 0.0, 100, 1, 0),
            sim.TraceReq("long2", 0.0, 1200, 1, 0)]
    capped = sim_chunked.simulate_chunked(reqs, est, budget=2048, cap=512)
    step = lambda *p: est.prefill_ms(132, [PrefillReq(n, r) for n, r in p])  # noqa: E731
    assert capped.ttft_s[1] == pytest.approx(step((512, 0), (100, 0)) / 1e3)  # short: the first step
    # long: 6 steps (512 x 5 + 440); long2 waits, then 512 beside long's last piece, then 512, 176
    t = [step((512, 0), (100, 0))] + [step((512, 512 * k)) for k in range(1, 5)] + [step((440, 2560), (512, 0))]
    assert capped.ttft_s[0] == pytest.approx(sum(t) / 1e3)
    t += [step((512, 512)), step((176, 1024))]
    assert capped.ttft_s[2] == pytest.approx(sum(t) / 1e3)
    assert capped.summary["policy"] == "chunked-2048-cap512"
    plain = sim_chunked.simulate_chunked(reqs, est, budget=2048)
    assert plain.ttft_s[1] > capped.ttft_s[1] * 2  # behind the long prompt's 2048-token steps
    with pytest.raises(ValueError, match="cap must be > 0"):
        sim_chunked.simulate_chunked(reqs, est, budget=2048, cap=0)
