import pytest

from bench import stats


def test_slowest_rank_decides():
    # rank 0: 512 images in 2.0 s, rank 1: 512 images in 2.5 s -> 1024 / 2.5 = 409.6
    assert stats.merge_repeat([2.0, 2.5], [512, 512]) == pytest.approx(409.6)


def test_spread_by_hand():
    s = stats.spread([90.0, 100.0, 110.0])
    assert s["median"] == 100.0 and s["min"] == 90.0 and s["max"] == 110.0
    assert s["spread_pct"] == pytest.approx(20.0)
    assert s["stdev"] == pytest.approx(10.0)


def test_merge_ranks_by_hand():
    ranks = [
        {"windows_s": [1.0, 2.0, 1.0], "images": [100, 100, 100], "data_wait_s": [0.1, 0.2, 0.1]},
        {"windows_s": [1.25, 1.0, 1.0], "images": [100, 100, 100], "data_wait_s": [0.0, 0.0, 0.4]},
    ]
    m = stats.merge_ranks(ranks, gpus=2)
    # repeats: 200/1.25=160, 200/2=100, 200/1=200 -> median 160
    assert m["images_per_s_repeats"] == pytest.approx([160.0, 100.0, 200.0])
    assert m["images_per_s"] == pytest.approx(160.0)
    assert m["images_per_s_per_gpu"] == pytest.approx(80.0)
    assert m["spread_pct"] == pytest.approx(62.5)
    # rank 0 waited 0.4 of 4.0 s (10%), rank 1 0.4 of 3.25 s (12.3%): the larger share is reported
    assert m["data_wait_pct"] == pytest.approx(100 * 0.4 / 3.25)
    assert m["slowest_rank"] == 0


def test_merge_ranks_rejects_uneven_repeats():
    with pytest.raises(ValueError, match="different numbers of repeats"):
        stats.merge_ranks([{"windows_s": [1.0], "images": [1], "data_wait_s": [0]},
                           {"windows_s": [1.0, 1.0], "images": [1, 1], "data_wait_s": [0, 0]}], 2)


def test_efficiency_and_improvement_by_hand():
    # the seed table's 4-GPU row: 498.4 baseline against 183.2 on one GPU
    assert stats.scaling_efficiency(498.4, 4, 183.2) == pytest.approx(68.01, abs=0.01)
    assert stats.improvement_pct(498.4, 698.3) == pytest.approx(40.1, abs=0.05)
    assert stats.improvement_pct(312.7, 347.5) == pytest.approx(11.1, abs=0.05)
    with pytest.raises(ValueError):
        stats.improvement_pct(0, 1)
