"""Seconds each test file took in `make test` from a fresh clone with an empty home, on a 2-core machine (its two
workers side by side), at f76d4a2 with the install's bytecode compiled: the weights xdist's units are handed out by, the
longest first, so that the last ones are short and both workers end together. A file not listed weighs 5 s for
each of its end-to-end (slow) tests; a stale figure only makes the end less even."""
FILE_SECONDS = {
    "test_readme.py": 120, "test_faults.py": 84, "test_launch.py": 63, "test_recommend.py": 38,
    "test_data_and_loaders.py": 36, "test_feed.py": 35, "test_pytest_plugin.py": 33, "test_models.py": 29,
    "test_diagnosis.py": 25, "test_ab.py": 24, "test_cli.py": 21, "test_span.py": 14, "test_timm.py": 12,
    "test_prime.py": 11, "test_hostile_records.py": 9, "test_html_report.py": 9, "test_results_and_report.py": 9,
    "test_phases.py": 8, "test_shared_gpu.py": 8, "test_compile_wrapper.py": 8, "test_host_cache.py": 7,
    "test_experiments.py": 5, "test_sweeps_and_plots.py": 5, "test_forkserver.py": 5, "test_input_channels.py": 5,
}
SLOW_TEST_SECONDS = 5
