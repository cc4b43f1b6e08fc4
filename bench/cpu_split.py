"""Which CPUs each cell of a multi-GPU host gets: whole cores, both hyperthreads of a core in one cell.

    python -m bench.cpu_split --cells 4 --cell 2        (prints a taskset list, e.g. 8-11,40-43)

Cells that share a physical core through its two hyperthreads slow each other's single-threaded
host loop: on session 44's 4 x H100 VM, four cells side by side launched SGLang's mixed batches
38 % slower than a lone H100 did (bench/results/profile_s45_2026-11-27/), and a split by vCPU
number puts a core's two threads in different cells wherever a VM numbers the second threads after
all the first ones. This reads the kernel's topology (``/sys/devices/system/cpu``: the online
CPUs, each one's package and core id), orders the cores, and gives cell i the i-th equal run of
them with all their threads. Without topology files each CPU counts as its own core (the plain
split by number). CPU only; no GPU.
"""
from __future__ import annotations

from pathlib import Path

from sglang_mux import cli

SYSFS = "/sys/devices/system/cpu"


def parse_list(text: str) -> list[int]:
    """A kernel CPU list ("0-3,8,10-11") as numbers."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def format_list(cpus: list[int]) -> str:
    """Numbers as a kernel CPU list, runs collapsed ("0-3,8")."""
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def cores(sysfs: str | Path = SYSFS) -> list[list[int]]:
    """The online CPUs grouped by physical core (package, core id), cores in order of their
    lowest CPU number."""
    root = Path(sysfs)
    online = parse_list((root / "online").read_text())
    groups: dict[tuple[str, str], list[int]] = {}
    for c in online:
        topo = root / f"cpu{c}" / "topology"
        try:
            key = ((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip())
        except OSError:
            key = ("cpu", str(c))  # no topology: its own core
        groups.setdefault(key, []).append(c)
    return sorted(groups.values(), key=min)


def cell_cpus(n_cells: int, cell: int, sysfs: str | Path = SYSFS) -> list[int]:
    """The CPUs of ``cell`` (0-based) when the host's cores are shared by ``n_cells`` cells."""
    if not 0 <= cell < n_cells:
        raise cli.UsageError(f"cell {cell} of {n_cells}: give 0 <= --cell < --cells")
    cs = cores(sysfs)
    per = len(cs) // n_cells
    if per == 0:
        raise cli.UsageError(f"{len(cs)} cores for {n_cells} cells: fewer cells, or a larger host")
    return sorted(c for core in cs[cell * per:(cell + 1) * per] for c in core)


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.cpu_split", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=cli.positive(int), required=True, help="cells sharing the host (its GPUs)")
    ap.add_argument("--cell", type=cli.positive(int, allow_zero=True), required=True, help="this cell, 0-based (its GPU)")
    ap.add_argument("--sysfs", default=SYSFS, help=f"the CPU topology's root (default {SYSFS})")
    a = ap.parse_args(argv)
    try:
        print(format_list(cell_cpus(a.cells, a.cell, a.sysfs)))
    except OSError as e:
        ap.error(f"{a.sysfs}: no CPU topology to read ({e})")
    return 0


if __name__ == "__main__":
    cli.run(main)
