"""Does a host-to-device copy on one stream wait for another stream's kernels?

Served, the mux's iteration that starts a layer-wise prefill batch spent 20-33 ms in its first
launch (SGLang's ForwardBatch.init_new: small pageable tensors copied ``non_blocking``) while
the decode just launched on another stream ran ~20 ms. This times, on the host, each kind of
small copy or sync on stream B while stream A runs a ~20 ms spin kernel; on plain streams and,
where torch has them, on two green contexts. Prints one JSON line per case.
    python -m profiling.h2d_block
"""

from __future__ import annotations

import json
import time

from sglang_mux import cli
from sglang_mux import cli_io as _cli_io


def main(argv=None) -> int:
    cli.ArgumentParser(prog="python -m profiling.h2d_block", description=__doc__.splitlines()[0]).parse_args(argv)
    _cli_io.need_gpu("profiling.h2d_block")
    import torch

    dev = torch.device("cuda")
    # One spin kernel of ~20 ms (torch.cuda._sleep counts GPU cycles), calibrated.
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda._sleep(10_000_000)
    torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / 10_000_000
    cycles = int(0.020 / per)
    data = list(range(4096))
    pinned = torch.tensor(data).pin_memory()

    cases = {
        "pageable_h2d_nonblocking": lambda: torch.tensor(data).to(dev, non_blocking=True),
        "pageable_h2d_blocking": lambda: torch.tensor(data).to(dev),
        "tensor_on_device": lambda: torch.tensor(data, device=dev),
        "pinned_h2d_nonblocking": lambda: pinned.to(dev, non_blocking=True),
        "d2h_item_own_stream": lambda: torch.ones(1, device=dev).sum().item(),
        "empty_fill": lambda: torch.empty(4096, device=dev).fill_(1.0),
    }

    def streams():
        yield "plain", torch.cuda.Stream(), torch.cuda.Stream()
        gc = getattr(torch.cuda, "green_contexts", None)
        if gc is not None:
            try:
                g1 = gc.GreenContext.create(64, 0)
                g2 = gc.GreenContext.create(64, 0)
                yield "green", g1.Stream(), g2.Stream()
            except Exception as e:  # noqa: BLE001
                print(json.dumps({"green": f"unavailable: {e!r}", "api": [x for x in dir(gc) if not x.startswith("_")],
                                  "ctx_api": [x for x in dir(getattr(gc, "GreenContext", object)) if not x.startswith("_")]}))

    for kind, sa, sb in streams():
        for name, fn in cases.items():
            times = []
            for _ in range(5):
                torch.cuda.synchronize()
                with torch.cuda.stream(sa):
                    torch.cuda._sleep(cycles)
                with torch.cuda.stream(sb):
                    t = time.perf_counter()
                    fn()
                    times.append((time.perf_counter() - t) * 1e3)
                ta = time.perf_counter()
                torch.cuda.synchronize()
                rest = (time.perf_counter() - ta) * 1e3
            times.sort()
            print(json.dumps({"streams": kind, "case": name, "busy_ms": round(cycles * per * 1e3, 1),
                              "host_ms_median": round(times[2], 3), "host_ms_max": round(times[-1], 3),
                              "then_sync_ms": round(rest, 1)}))
    return 0


if __name__ == "__main__":
    cli.run(main)
