import pytest

from bench.core import stats


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
    # windows: 200/1.25=160, 200/2=100, 200/1=200; the span: 600 images over 1.25+2+1 = 4.25 s
    assert m["images_per_s_repeats"] == pytest.approx([160.0, 100.0, 200.0])
    assert m["images_per_s"] == pytest.approx(600 / 4.25)
    assert m["images_per_s_per_gpu"] == pytest.approx(300 / 4.25)
    # seconds per image of each window: 0.00625, 0.01, 0.005 (mean 0.0070833, sd 0.0026021), over sqrt(3)
    assert m["window_rel_se"] == pytest.approx(0.0026021 / 0.0070833 / 3 ** 0.5, rel=1e-4)
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


# two-sided 95% points of Student's t as published tables give them (4 decimals)
KNOWN_T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 5: 2.5706, 6: 2.4469, 10: 2.2281, 11: 2.2010, 15: 2.1314,
              20: 2.0860, 29: 2.0452, 30: 2.0423, 31: 2.0395, 40: 2.0211, 45: 2.0141, 59: 2.0010, 60: 2.0003,
              100: 1.9840, 120: 1.9799, 1000: 1.9623}


@pytest.mark.parametrize("df, t", sorted(KNOWN_T975.items()))
def test_t_quantiles_are_exact_at_every_df(df, t):
    # the old sparse table gave df 11 the value of df 10 (2.228) and df 31-59 that of df 30 (2.042)
    assert stats.t975(df) == pytest.approx(t, abs=5e-5)


def test_t_quantiles_fall_steadily_to_the_normal_point():
    values = [stats.t975(df) for df in range(1, 400)]
    assert all(a > b for a, b in zip(values, values[1:])) and values[-1] > 1.95996
    with pytest.raises(ValueError):
        stats.t975(0)


def test_noise_floor_by_hand():
    f = stats.noise_floor([990.0, 1000.0, 1010.0])
    assert f["n"] == 3 and f["rel_sd"] == pytest.approx(0.01)
    with pytest.raises(ValueError):
        stats.noise_floor([1000.0])


def test_ci95_from_the_floor_alone():
    # one process at 1000 images/s, floor sd 1% over 3 processes (df 2, t 4.3027), no window noise:
    # half-width = 4.3027 x sqrt(0.01^2 / 1) x 1000 = 43.027
    floor = {"rel_sd": 0.01, "n": 3}
    assert stats.ci95([1000.0], [0.0], floor) == pytest.approx([956.973, 1043.027])
    # window noise adds: 4.3027 x sqrt(0.01^2 + 0.02^2) x 1000 = 96.21
    assert stats.ci95([1000.0], [0.02], floor) == pytest.approx([1000 - 96.21, 1000 + 96.21], abs=0.01)


def test_ci95_weighs_many_windows_by_their_own_degrees_of_freedom():
    # floor sd 1% over 3 processes (variance 1e-4, df 2); one process of 6 windows, se 2% (4e-4, df 5):
    # Welch-Satterthwaite df = (5e-4)^2 / (1e-8 / 2 + 1.6e-7 / 5) = 6.76 -> 6, t = 2.4469
    floor = {"rel_sd": 0.01, "n": 3}
    half = 2.4469 * (5e-4) ** 0.5 * 1000
    assert stats.ci95([1000.0], [0.02], floor, [6]) == pytest.approx([1000 - half, 1000 + half])
    # three windows (df 2) add little certainty: df = 2.5e-7 / (5e-9 + 8e-8) = 2.94 -> 2, t = 4.3027
    half = 4.3027 * (5e-4) ** 0.5 * 1000
    assert stats.ci95([1000.0], [0.02], floor, [3]) == pytest.approx([1000 - half, 1000 + half])
    assert stats.satterthwaite_df([(1e-4, 2), (0.0, 5)]) == 2


def test_ci95_pools_the_floor_with_the_cases_own_processes():
    # K=3 at 990, 1000, 1010 (sd 1%, df 2) and a floor of sd 2% over 4 processes (df 3):
    # pooled = (3 x 0.0004 + 2 x 0.0001) / 5 = 0.00028; t(5) = 2.5706; half = 2.5706 x sqrt(0.00028 / 3) x 1000
    lo, hi = stats.ci95([990.0, 1000.0, 1010.0], [0.0, 0.0, 0.0], {"rel_sd": 0.02, "n": 4})
    half = 2.5706 * (0.00028 / 3) ** 0.5 * 1000
    assert (lo, hi) == pytest.approx((1000 - half, 1000 + half))


def test_one_process_and_no_floor_cannot_be_judged():
    assert stats.ci95([1000.0], [0.01], None) is None
    assert stats.ci95([1000.0, 1020.0], [0.0, 0.0], None) is not None  # two processes: their own spread


def test_combine_processes_takes_the_median_process():
    procs = [{"images_per_s": v, "images_per_s_per_gpu": v / 2, "window_rel_se": 0.0, "tag": t}
             for v, t in ((1010.0, "a"), (990.0, "b"), (1000.0, "c"))]
    m = stats.combine_processes(procs, None, gpus=2)
    assert m["images_per_s"] == 1000.0 and m["images_per_s_per_gpu"] == 500.0 and m["tag"] == "c"
    assert m["images_per_s_processes"] == [1010.0, 990.0, 1000.0] and m["processes"] == 3
    lo, hi = m["images_per_s_ci95"]
    assert lo < 990 < 1010 < hi  # t(2) = 4.3027 x 1% / sqrt(3) = 2.5%
