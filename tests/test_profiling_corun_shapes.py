"""profiling.corun_shapes: the shape arguments (the GPU part runs on the device only)."""
import argparse

import pytest

from profiling.corun_shapes import label, parse_decode, parse_prefill


def test_prefill_shapes():
    assert parse_prefill("8192+0") == [(8192, 0)]
    assert parse_prefill("4x3200+256") == [(3200, 256)] * 4
    assert label(parse_prefill("4x3200+256")) == "4x3200+256" and label([(8192, 0)]) == "8192+0"
    for bad in ("8192", "0+5", "0x10+0", "4x+5", "a+b"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected"):
            parse_prefill(bad)


def test_decode_batches():
    assert parse_decode("32x8192,64x2048") == [(32, 8192), (64, 2048)]
    with pytest.raises(argparse.ArgumentTypeError, match="BSxREUSED"):
        parse_decode("32")
    with pytest.raises(argparse.ArgumentTypeError, match="BSxREUSED"):
        parse_decode("0x10")
