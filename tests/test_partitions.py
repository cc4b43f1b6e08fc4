import pytest

from sglang_mux.partitions import PartitionConfig, full_modes, partition_configs, validate_granularity


def test_h100_ladder_is_seven_configs_of_16():
    cfgs = partition_configs(132, 16)
    assert [c.decode_sms for c in cfgs] == [16, 32, 48, 64, 80, 96, 112]
    assert [c.prefill_sms for c in cfgs] == [116, 100, 84, 68, 52, 36, 20]
    assert all(c.is_multiplexed for c in cfgs)


def test_every_side_keeps_at_least_one_granule():
    # 108 SMs (A100): decode 96 would leave prefill only 12 SMs, so the ladder stops at 80/28.
    cfgs = partition_configs(108, 16)
    assert [c.decode_sms for c in cfgs] == [16, 32, 48, 64, 80]
    assert min(c.prefill_sms for c in cfgs) == 28


def test_full_modes():
    p, d = full_modes(132)
    assert p == PartitionConfig(0, 132) and p.is_full_prefill and not p.is_multiplexed
    assert d == PartitionConfig(132, 0) and d.is_full_decode


@pytest.mark.parametrize("g", [0, 4, 12, 17])
def test_bad_granularity_says_what_to_use(g):
    with pytest.raises(ValueError, match="use 16"):
        validate_granularity(132, g)


def test_granularity_too_large_for_device():
    with pytest.raises(ValueError, match="no split"):
        partition_configs(132, 72)
    assert len(partition_configs(132, 64)) == 1
