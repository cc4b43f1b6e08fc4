import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

from sglang_mux.launch_server import HYBRID_PREFILL_GRAPH, explicit_flags, forced_flags
from sglang_mux.policy import SLO
from sglang_mux.mux_args import (ENV_VAR, MuxArgError, MuxArgs, add_mux_args, flag_name, markdown_table,
                                 reconcile_sglang_args, split_argv)


def sglang_defaults(**kw):
    base = dict(pp_size=1, tp_size=1, dp_size=1, chunked_prefill_size=8192, disaggregation_mode="null",
                enable_mixed_chunk=False, disable_overlap_schedule=False, enable_pdmux=False,
                speculative_algorithm=None, attention_backend="fa3", prefill_attention_backend=None,
                decode_attention_backend=None)
    base.update(kw)
    return SimpleNamespace(**base)


def test_split_keeps_sglang_args_untouched():
    mux, rest = split_argv(["--model-path", "m", "--mux-tbt-slo-ms", "40", "--no-mux-preemption",
                            "--mux-policy", "fixed", "--mux-fixed-decode-sms", "48", "--port", "1"])
    assert rest == ["--model-path", "m", "--port", "1"]
    assert (mux.tbt_slo_ms, mux.preemption, mux.policy, mux.fixed_decode_sms) == (40.0, False, "fixed", 48)
    assert split_argv(["--mux-timeline-max-mb", "8"])[0].timeline_max_mb == 8.0
    assert split_argv([])[0].tbt_host_budget is True
    assert split_argv(["--no-mux-tbt-host-budget"])[0].tbt_host_budget is False


def test_env_round_trip(monkeypatch):
    a = MuxArgs(tbt_slo_ms=33, policy="batch-size", timeline="/tmp/t.jsonl")
    monkeypatch.setenv(ENV_VAR, a.to_env())
    assert MuxArgs.from_env() == a


@pytest.mark.parametrize("kw,msg", [
    (dict(tbt_slo_ms=0), "--mux-tbt-slo-ms"),
    (dict(ttft_slo_ms=-1), "--mux-ttft-slo-ms"),
    (dict(policy="magic"), "--mux-policy"),
    (dict(sm_granularity=12), "granularity"),
    (dict(contention_table="/nonexistent/x"), "no such table directory, nor a table of that name"),
    (dict(policy="fixed", fixed_decode_sms=40), "multiple"),
    (dict(timeline_max_mb=0), "--mux-timeline-max-mb"),
    (dict(tbt_host_quantile=1.5), "--mux-tbt-host-quantile"),
    (dict(fused_host_quantile=0.0), r"--mux-fused-host-quantile must be in \(0, 1\]"),
    (dict(tbt_slo_ms=float("nan")), "--mux-tbt-slo-ms must be a finite number of ms > 0, got nan"),
    (dict(ttft_slo_ms=float("inf")), "--mux-ttft-slo-ms must be a finite number of ms > 0, got inf"),
    (dict(ttft_ms_per_token=-0.1), "--mux-ttft-ms-per-token must be a finite number of ms >= 0"),
    (dict(timeline_max_mb=float("inf")), "--mux-timeline-max-mb"),
    (dict(tbt_host_quantile=float("nan")), "--mux-tbt-host-quantile"),
])
def test_invalid_args_are_explained(kw, msg):
    with pytest.raises(MuxArgError, match=msg):
        MuxArgs(**kw).validate()


def test_what_depends_on_the_gpu_is_checked_against_its_sm_count():
    with pytest.raises(MuxArgError, match="fewer than 16"):
        MuxArgs(policy="fixed", fixed_decode_sms=128).check_gpu(132)
    MuxArgs(policy="fixed", fixed_decode_sms=112).check_gpu(132)
    with pytest.raises(MuxArgError, match="leaves no split"):
        MuxArgs(sm_granularity=72).check_gpu(132)
    MuxArgs(sm_granularity=72).validate()  # a multiple of 8: only a GPU can say it is too coarse


def test_the_slo_is_the_flags_and_is_what_the_policy_is_built_with():
    a = MuxArgs(tbt_slo_ms=30, ttft_slo_ms=2000, ttft_ms_per_token=0.2)
    assert a.slo == SLO(30, 2000, 0.2) and a.slo.ttft_ms_for(1000) == 2200


def test_defaults_are_set_and_said():
    sa = sglang_defaults()
    notes = reconcile_sglang_args(sa, explicit=set())
    assert sa.chunked_prefill_size == -1 and sa.disable_overlap_schedule and sa.enable_pdmux
    assert any("--chunked-prefill-size" in n for n in notes)
    assert any("--disable-overlap-schedule" in n for n in notes)


@pytest.mark.parametrize("flag,attr,val", [
    ("--chunked-prefill-size", "chunked_prefill_size", 512),
    ("--pp-size", "pp_size", 2),
    ("--disaggregation-mode", "disaggregation_mode", "prefill"),
    ("--enable-mixed-chunk", "enable_mixed_chunk", True),
])
def test_explicit_incompatible_args_are_rejected(flag, attr, val):
    sa = sglang_defaults(**{attr: val})
    with pytest.raises(MuxArgError, match=flag):
        reconcile_sglang_args(sa, explicit={flag})


def test_tensor_and_data_parallel_accepted_dp_attention_rejected():
    with pytest.raises(MuxArgError, match="--enable-dp-attention"):
        reconcile_sglang_args(sglang_defaults(dp_size=2, enable_dp_attention=True),
                              explicit={"--dp-size", "--enable-dp-attention"})
    sa = sglang_defaults(tp_size=2, dp_size=2)
    reconcile_sglang_args(sa, explicit={"--tp-size", "--dp-size"})
    assert (sa.tp_size, sa.dp_size) == (2, 2) and sa.enable_pdmux


def test_explicit_flags_parses_equals_form():
    assert explicit_flags(["--a=1", "--b", "2", "x"]) == {"--a", "--b"}


@pytest.mark.parametrize("backend", ["fa3", "triton"])
def test_muxable_backends_pass(backend):
    reconcile_sglang_args(sglang_defaults(attention_backend=backend), explicit={"--attention-backend"})


def test_other_backend_is_refused_naming_those_that_work():
    with pytest.raises(MuxArgError, match=r"'torch_native' cannot be multiplexed.*fa3, triton"):
        reconcile_sglang_args(sglang_defaults(attention_backend="torch_native"), explicit={"--attention-backend"})


def test_split_prefill_decode_backends_are_refused():
    sa = sglang_defaults(attention_backend="fa3", decode_attention_backend="triton")
    with pytest.raises(MuxArgError, match="prefill attention backend 'fa3' != decode attention backend 'triton'"):
        reconcile_sglang_args(sa, explicit={"--decode-attention-backend"})


# ---- one source for the flags ---------------------------------------------------------------

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN, END = "<!-- mux-flags:begin -->", "<!-- mux-flags:end -->"


def test_every_field_is_a_flag_with_its_default():
    from dataclasses import fields

    ap = argparse.ArgumentParser()
    add_mux_args(ap)
    dests = {a.dest: a for a in ap._actions}
    for f in fields(MuxArgs):
        assert f.name in dests and dests[f.name].default == f.default, f.name
        assert flag_name(f) in dests[f.name].option_strings
    # Every field round-trips through split_argv from its own flag, nothing reaches SGLang.
    argv = ["--mux-tbt-slo-ms", "31", "--mux-ttft-slo-ms", "4000", "--mux-ttft-ms-per-token", "0.5",
            "--mux-sm-granularity", "8", "--mux-contention-table", "/t", "--no-mux-preemption", "--mux-fcfs-prefill", "--mux-policy",
            "fixed", "--mux-fixed-decode-sms", "48", "--mux-timeline", "tl.jsonl", "--mux-timeline-max-mb", "9",
            "--no-mux-tbt-host-budget", "--mux-tbt-host-quantile", "0.99", "--mux-fused-host-quantile", "0.98",
            "--mux-fused-start-budget", "--no-mux-overlap-decode", "--mux-defer-prefill-start", "--disable-mux",
            "--mux-layerwise-max-tokens", "35000"]
    got, rest = split_argv(argv)
    assert rest == [] and got == MuxArgs(31.0, 4000.0, 0.5, 8, "/t", False, True, "fixed", 48, "tl.jsonl", 9.0, False,
                                         0.99, 0.98, True, False, True, True, 35000)


def test_flag_table_has_a_row_per_field():
    from dataclasses import fields

    table = markdown_table()
    lines = table.splitlines()
    assert lines[0] == "| flag | default | meaning |" and len(lines) == 2 + len(fields(MuxArgs))
    assert "| `--mux-preemption` / `--no-mux-preemption` | on |" in table
    assert "| `--mux-tbt-slo-ms` | 50 |" in table and "| `--mux-timeline` | — |" in table
    assert "| `--disable-mux` | off |" in table and "| `--mux-contention-table` | `auto` |" in table


def test_markdown_is_printable(capsys):
    from sglang_mux import cli
    from sglang_mux.mux_args import main

    with pytest.raises(SystemExit) as e:
        cli.run(main, ["--markdown"])
    assert e.value.code == 0 and capsys.readouterr().out == markdown_table()


def test_readme_flag_table_is_the_generated_one():
    text = README.read_text(encoding="utf-8") if README.is_file() else ""
    if BEGIN not in text or END not in text:
        pytest.skip(f"README.md has no {BEGIN} ... {END} block to compare (print the table with "
                    "`python -m sglang_mux.mux_args --markdown` and put it between those markers)")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert block == markdown_table(), ("README's flag table differs from the code's; regenerate it: "
                                       "python -m sglang_mux.mux_args --markdown")


def test_a_contention_table_is_a_shipped_name_or_a_directory(good):
    MuxArgs(contention_table="llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3").validate()
    MuxArgs(contention_table=str(good)).validate()


def test_the_hybrid_gets_sglangs_prefill_graph_unless_the_user_chose():
    from sglang_mux.policy import CHUNK_SIZES

    """The flags added before SGLang parses: the mux's own, and for the hybrid the prefill CUDA
    graph its fused chunks run through; a flag the user gave is theirs, --disable-mux adds none."""
    base = [f for f, _ in forced_flags(split_argv(["--mux-policy", "dispatcher"])[0], set())]
    assert base == ["--chunked-prefill-size", "--disable-overlap-schedule", "--enable-pdmux"]
    hybrid = split_argv([])[0]  # the default policy
    assert forced_flags(hybrid, set())[-1] == HYBRID_PREFILL_GRAPH == ("--cuda-graph-max-bs-prefill", ["4096"])
    assert max(CHUNK_SIZES) == 4096  # the largest fused batch (a size counts the decode rows) is captured
    for chosen in ({"--cuda-graph-max-bs-prefill"}, {"--disable-cuda-graph"}):
        assert HYBRID_PREFILL_GRAPH not in forced_flags(hybrid, chosen)
    assert [f for f, _ in forced_flags(hybrid, {"--disable-overlap-schedule"})][:2] == [
        "--chunked-prefill-size", "--enable-pdmux"]
    assert forced_flags(split_argv(["--mux-policy", "hybrid", "--disable-mux"])[0], set()) == []


@pytest.mark.parametrize("argv, ok", [
    (["--mux-layerwise-max-tokens", "35000"], True),
    (["--mux-layerwise-max-tokens", "0"], True),
    (["--mux-layerwise-max-tokens", "-1"], False),
    (["--mux-policy", "dispatcher", "--mux-layerwise-max-tokens", "35000"], False),
])
def test_the_layerwise_cap_is_a_hybrid_token_count(argv, ok):
    """--mux-layerwise-max-tokens: a prompt longer than it runs as the hybrid's fused chunks; another
    policy has no chunks to run it in, so it is refused there, as is a negative count."""
    args, _ = split_argv(argv)
    if ok:
        args.validate()
    else:
        with pytest.raises(MuxArgError, match="--mux-layerwise-max-tokens"):
            args.validate()


def test_decode_graph_sizes_are_thinned_for_one_set_per_partition():
    """SGLang's default list on an 80 GB GPU (36 sizes) becomes 17, each >= 1.25x the last, the
    largest kept; the user's own list (or config) is left alone."""
    from types import SimpleNamespace

    from sglang_mux.launch_server import thin_decode_graph, thinned_decode_sizes

    sglang = [1, 2, 4, 8, 12, 16, *range(24, 257, 8)]
    assert len(sglang) == 36
    thin = [1, 2, 4, 8, 12, 16, 24, 32, 40, 56, 72, 96, 120, 152, 192, 240, 256]
    assert thinned_decode_sizes(sglang) == thin
    assert thinned_decode_sizes([1, 2, 3, 4, 5, 6, 7, 8]) == [1, 2, 3, 4, 5, 7, 8]
    assert thinned_decode_sizes([16, 8, 1]) == [1, 8, 16]

    def args(bs):
        return SimpleNamespace(cuda_graph_config=SimpleNamespace(decode=SimpleNamespace(bs=list(bs))))

    a = args(sglang)
    note = thin_decode_graph(a, {"--mem-fraction-static"})
    assert a.cuda_graph_config.decode.bs == thin and "--cuda-graph-bs-decode 1 2 4 8 12" in note and "17 of" in note
    for flag in ("--cuda-graph-bs-decode", "--cuda-graph-bs", "--cuda-graph-config"):
        a = args(sglang)
        assert thin_decode_graph(a, {flag}) is None and a.cuda_graph_config.decode.bs == sglang
    a = args([1, 2, 4])  # nothing to thin: no note
    assert thin_decode_graph(a, set()) is None and a.cuda_graph_config.decode.bs == [1, 2, 4]
    assert thin_decode_graph(args([]), set()) is None  # decode graph off
