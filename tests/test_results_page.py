"""docs/results.md is bench.results_page's output over bench/results/, and the generator reads
only the folders' summary.json files, refusing a folder it cannot describe."""
import json
import re
from pathlib import Path

import pytest

from bench import results_page as page

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_page_is_what_the_generator_makes_of_bench_results(capsys):
    got = page.render(page.load(ROOT / "bench/results")) + "\n"
    assert got == (ROOT / "docs/results.md").read_text(), "docs/results.md is stale: run python -m bench.results_page"
    assert (ROOT / "docs/slo_map.png").stat().st_size > 0
    assert page.main(["--check"]) == 0


def test_the_page_says_no_session_numbers_and_names_every_kept_folder():
    text = (ROOT / "docs/results.md").read_text()
    assert re.search(r"session \d", text, re.IGNORECASE) is None
    for d in (ROOT / "bench/results").iterdir():
        if d.is_dir():
            assert f"`{d.name}/`" in text, d.name


# ---- a synthetic results directory ----------------------------------------------------------------

MUX = ["python", "-m", "sglang_mux.launch_server", "--model-path", "launch/models/llama-3.1-8b", "--mux-policy", "hybrid"]
CHUNKED = ["python", "-m", "sglang.launch_server", "--model-path", "launch/models/llama-3.1-8b", "--chunked-prefill-size", "512"]


def point(rate, tbt_p99):
    return {"rate": rate, "summary": {"n_ok": 10, "n_failed": 0, "failures": {}, "tbt_ms": {"p99": tbt_p99},
                                      "ttft_ms": {"p99": 1000.0}, "ttft_drift": {"ok": True}}}


def sweep(mux_pts, chunked_pts, date="2026-11-27T08:00:00+00:00", seed=0):
    """A bench.run summary of the hybrid and chunked 512 at TBT 50; points as (rate, P99 TBT)."""
    return {"date": date, "device": "NVIDIA H100 80GB HBM3", "hardware": {"cpu_model": "x", "cpus": 16},
            "command": "/venv/bin/python -m bench.run --systems sglang-chunked-512 --rates 2 --time-budget-s 300 "
                       "--tbt-slo-ms 50 --workload conversation --input-cap 8000 --seed 0 --out /tmp/c --no-progress",
            "slo": {"tbt_ms": 50.0, "ttft_ms": 5000.0}, "workload": {"workload": "conversation", "input_cap": 8000, "seed": seed},
            "systems": {"mux-hybrid": {"start": {"command": MUX}, "points": [point(*p) for p in mux_pts]},
                        "sglang-chunked-512": {"start": {"command": CHUNKED}, "points": [point(*p) for p in chunked_pts]}}}


def folder(results: Path, name: str, summary: dict, readme: bool = True, **files) -> Path:
    d = results / name
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(summary))
    if readme:
        (d / "README.md").write_text(f"# {name}\n")
    for rel, obj in files.items():
        p = d / rel.replace("__", "/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(obj))
    return d


def record(**kw):
    return {"record": "results-page", "what": "A run.", "device": "NVIDIA H200", "date": "2026-11-28",
            "command": "bash bench/plans/x.sh OUT", **kw}


def test_a_sweep_is_one_cell_judged_by_its_own_points(tmp_path):
    # the hybrid passes 1 and 2 and fails 3; chunked 512 passes 1 and fails 2
    folder(tmp_path, "cap50", sweep([(1, 40), (2, 45), (3, 60)], [(1, 40), (2, 55)]))
    r = page.load(tmp_path)
    (c,) = r.cells
    assert (c.mux, c.base, c.best) == (("=", 2.0), ("=", 1.0), "chunked-512")
    assert (c.rel, c.value, c.of_record, c.policy, c.gpu, c.workload) == ("", 2.0, True, "hybrid", "H100", "capped conversation")
    # the command serves every system at every rate of the cell again, into the folder
    assert c.command == ("python -m bench.run --systems mux-hybrid,sglang-chunked-512 --rates 1,2,3 --tbt-slo-ms 50 "
                         "--workload conversation --input-cap 8000 --seed 0 --out bench/results/cap50")
    text = page.render(r)
    assert "| 1 | H100 | 50 | capped conversation | 0 | mux-hybrid 2 | chunked-512 1 | **2.00** |" in text
    assert "`cap50/`" in text and "NVIDIA H100 80GB HBM3" in text


@pytest.mark.parametrize("mux, base, text", [
    (("=", 2), ("=", 2), "1.00"),
    (("≥", 3), ("=", 2), "≥ 1.50"),        # the hybrid passed every rate it ran
    (("=", 2), ("≥", 4), "≤ 0.50"),
    (("<", 2), ("=", 4), "< 0.50"),        # the hybrid passed none of its rates
    (("=", 3), ("<", 2), "> 1.50"),
    (("≥", 2), ("≥", 2), "not bracketed"),
    (("<", 2), ("<", 2), "not bracketed"),
])
def test_a_ratio_is_a_bound_where_a_side_is(mux, base, text):
    assert page.ratio_text(*page.ratio(mux, base)) == text


def test_the_cell_of_record_is_the_latest_with_a_ratio_or_a_bound(tmp_path):
    folder(tmp_path, "a_old", sweep([(1, 40), (2, 60)], [(1, 40), (2, 60)], date="2026-11-26T00:00:00+00:00"))
    # later, but both passed every rate: not bracketed, so not of record
    folder(tmp_path, "b_new", sweep([(1, 40)], [(1, 40)], date="2026-11-28T00:00:00+00:00"))
    # another seed is another cell
    folder(tmp_path, "c_seed1", sweep([(1, 40), (2, 60)], [(1, 60)], date="2026-11-25T00:00:00+00:00", seed=1))
    rec = {c.folder: c.of_record for c in page.load(tmp_path).cells}
    assert rec == {"a_old": True, "b_new": False, "c_seed1": True}


def test_a_records_cells_join_rounds_and_its_rows_read_their_values_from_files(tmp_path):
    first = sweep([(2, 45), (3, 60)], [(2, 45), (3, 60)])
    second = sweep([(1, 40)], [(1, 40), (2, 55)], date="2026-11-27T09:00:00+00:00")  # chunked 2 again: it fails now
    folder(tmp_path, "lease", record(
        cells=[{"runs": ["cap", "caplo"], "note": "two rounds"}],
        rows=[{"section": "reliability", "what": "soak", "result": "{sent:,} sent, {lost} lost",
               "files": ["soak_report.json"], "values": {"sent": "soak_report.json:sent", "lost": "soak_report.json:load.lost"}}]),
        **{"cap__summary.json": first, "caplo__summary.json": second, "soak_report.json": {"sent": 23278, "load": {"lost": 0}}})
    r = page.load(tmp_path)
    (c,) = r.cells
    assert (c.mux, c.base, c.value) == (("=", 2.0), ("=", 1.0), 2.0)  # the later round decides a rate run twice
    assert c.path == "lease/cap/+caplo/" and c.note == "two rounds"
    text = page.render(r)
    assert "| soak | 23,278 sent, 0 lost | NVIDIA H200 | 2026-11-28 | `lease/` (`soak_report.json`) |" in text
    assert "## Reliability" in text and "`bash bench/plans/x.sh OUT`" in text


@pytest.mark.parametrize("summary, message", [
    ({**record(), "date": None}, "lease/summary.json: no 'date'"),
    ({k: v for k, v in record().items() if k != "command"}, "lease/summary.json: no 'command'"),
    ({"whatever": 1}, "lease/summary.json: neither a bench.run summary nor a record"),
    (record(rows=[{"section": "tp", "what": "x"}]), "lease/summary.json rows[0]: no 'result'"),
    (record(rows=[{"section": "gossip", "what": "x", "result": "y"}]), "section 'gossip' is none of"),
    (record(rows=[{"section": "tp", "what": "x", "result": "y", "files": ["gone.json"]}]), "rows[0]: file 'gone.json' is not in the folder"),
    (record(rows=[{"section": "tp", "what": "x", "result": "{v}", "values": {"v": "gone.json:a"}}]), "value 'v' reads 'gone.json'"),
    (record(rows=[{"section": "tp", "what": "x", "result": "{v}", "values": {"v": "x.json:a.b"}}]), "value 'v': 'x.json' has no 'a.b'"),
    (record(rows=[{"section": "tp", "what": "x", "result": "{w}"}]), "result names a value it does not read"),
    (record(cells=[{"runs": ["nope"]}]), "lease/summary.json cells[0]: cell run 'nope' has no summary.json"),
])
def test_a_folder_the_page_cannot_describe_is_an_error_naming_it(tmp_path, summary, message):
    folder(tmp_path, "lease", summary, **{"x.json": {"a": 1}})
    with pytest.raises(page.PageError, match=re.escape(message)):
        page.load(tmp_path)


def test_a_sweep_without_its_device_or_a_folder_without_a_readme_is_refused(tmp_path):
    s = sweep([(1, 40)], [(1, 40)])
    del s["device"]
    folder(tmp_path, "cap", s)
    with pytest.raises(page.PageError, match="cap/summary.json: no 'device'"):
        page.load(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    folder(other, "run", record(), readme=False)
    with pytest.raises(page.PageError, match="run: no README.md"):
        page.load(other)


def test_pruned_runs_are_listed_with_their_commit_and_must_have_left(tmp_path):
    folder(tmp_path, "kept", record())
    pruned = [{"name": "old_run", "what": "an earlier sweep", "commit": "f634912", "superseded_by": "kept"}]
    (tmp_path / "pruned.json").write_text(json.dumps(pruned))
    text = page.render(page.load(tmp_path))
    assert "| `old_run` | an earlier sweep | `kept` | `f634912` |" in text
    for bad, message in ((dict(pruned[0], name="kept"), "'kept' is still in"),
                         (dict(pruned[0], commit="HEAD~1"), "is not a commit hash"),
                         (dict(pruned[0], superseded_by="elsewhere"), "'elsewhere' is not a kept folder"),
                         ({"name": "x", "commit": "abc1234"}, r"pruned.json\[0\]: no 'what'")):
        (tmp_path / "pruned.json").write_text(json.dumps([bad]))
        with pytest.raises(page.PageError, match=message):
            page.load(tmp_path)


def test_a_loose_file_must_be_a_probe_record_naming_device_date_and_command(tmp_path):
    folder(tmp_path, "kept", record())
    (tmp_path / "probe.json").write_text(json.dumps({"device": "NVIDIA H200", "date": "2026-11-22", "command": "python -m x"}))
    assert "- `probe.json`: NVIDIA H200; 2026-11-22; `python -m x`" in page.render(page.load(tmp_path))
    (tmp_path / "probe.json").write_text(json.dumps({"device": "NVIDIA H200", "date": "2026-11-22"}))
    with pytest.raises(page.PageError, match="probe.json: no 'command'"):
        page.load(tmp_path)
    (tmp_path / "probe.json").unlink()
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(page.PageError, match="notes.txt: a loose file"):
        page.load(tmp_path)


def test_check_fails_with_a_diff_on_a_stale_page_and_passes_once_regenerated(tmp_path, capsys):
    results = tmp_path / "results"
    folder(results, "cap50", sweep([(1, 40), (2, 60)], [(1, 40), (2, 60)]))
    out, png = tmp_path / "docs/results.md", tmp_path / "docs/slo_map.png"
    args = ["--results", str(results), "--out", str(out), "--png", str(png)]
    assert page.main(args) == 0 and png.stat().st_size > 0
    first = png.read_bytes()
    assert page.main(args + ["--check"]) == 0
    out.write_text(out.read_text().replace("**1.00**", "**1.10**"))
    capsys.readouterr()
    assert page.main(args + ["--check"]) == 1
    printed = capsys.readouterr().out
    assert "-| 1 | H100 | 50 |" in printed and "+| 1 | H100 | 50 |" in printed and "is stale" in printed
    assert page.main(args) == 0 and page.main(args + ["--check"]) == 0
    assert png.read_bytes() == first  # the picture is the same bytes each time


def test_the_readme_is_short_leads_with_the_two_commands_and_cites_kept_runs():
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    assert len(readme.read_bytes()) <= 12_000
    head = text.splitlines()[:40]
    assert "    bash launch/serve.sh llama-3.1-8b" in head
    assert "    python3 -m pip install -e '.[test]' && python3 -m pytest -q" in head
    for doc in (readme, *sorted((ROOT / "docs").glob("*.md"))):
        assert re.search(r"session \d", doc.read_text(encoding="utf-8"), re.IGNORECASE) is None, doc.name
    results = text.split("## Results", 1)[1].split("\n## ", 1)[0]
    cited = re.findall(r"`([\w.-]+_\d{4}-\d{2}-\d{2})/", results)
    page_text = (ROOT / "docs/results.md").read_text()
    assert len(cited) >= 6
    for name in cited:
        assert (ROOT / "bench/results" / name / "summary.json").exists() and f"`{name}/`" in page_text, name
