"""bench.cpu_split: each cell of a multi-GPU host gets whole cores, a core's hyperthreads together."""
import pytest

from bench import cpu_split as C
from sglang_mux.cli import UsageError


def _sysfs(tmp_path, online, core_of):
    """A fake /sys/devices/system/cpu: ``online`` list text, ``core_of`` {cpu: (package, core)}."""
    (tmp_path / "online").write_text(online + "\n")
    for cpu, (pkg, core) in core_of.items():
        t = tmp_path / f"cpu{cpu}" / "topology"
        t.mkdir(parents=True)
        (t / "physical_package_id").write_text(f"{pkg}\n")
        (t / "core_id").write_text(f"{core}\n")
    return tmp_path


def test_a_vm_that_numbers_second_threads_last_keeps_each_core_in_one_cell(tmp_path):
    # 4 cores x 2 threads: CPU i and i + 4 share core i (the numbering a plain split by number breaks)
    sysfs = _sysfs(tmp_path, "0-7", {c: (0, c % 4) for c in range(8)})
    assert C.cores(sysfs) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert [C.format_list(C.cell_cpus(2, i, sysfs)) for i in (0, 1)] == ["0-1,4-5", "2-3,6-7"]
    assert C.format_list(C.cell_cpus(4, 3, sysfs)) == "3,7"


def test_without_topology_each_cpu_is_its_own_core_and_bad_cells_say_what_to_give(tmp_path):
    (tmp_path / "online").write_text("0-5\n")
    assert C.cell_cpus(3, 2, tmp_path) == [4, 5]
    with pytest.raises(UsageError, match="0 <= --cell < --cells"):
        C.cell_cpus(3, 3, tmp_path)
    with pytest.raises(UsageError, match="6 cores for 8 cells"):
        C.cell_cpus(8, 0, tmp_path)


def test_lists_parse_and_print_as_the_kernel_writes_them(tmp_path, capsys):
    assert C.parse_list("0-2,5,7-8") == [0, 1, 2, 5, 7, 8] and C.format_list([8, 0, 1, 2, 5, 7]) == "0-2,5,7-8"
    sysfs = _sysfs(tmp_path, "0-3", {0: (0, 0), 1: (0, 0), 2: (1, 0), 3: (1, 0)})  # two packages, core 0 each
    assert C.main(["--cells", "2", "--cell", "1", "--sysfs", str(sysfs)]) == 0
    assert capsys.readouterr().out == "2-3\n"
    with pytest.raises(SystemExit):
        C.main(["--cells", "2", "--cell", "0", "--sysfs", str(tmp_path / "none")])
