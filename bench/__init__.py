"""A benchmark suite for multi-GPU ResNet-50 training, in layers that import only downwards:

core (Case, identity, sweeps, statistics, verdicts, errors) <- data (JPEG folders) <- worker (the
per-rank measured loop, started by module name); core <- store (typed records, the results tree,
the one query) <- analysis (diagnosis, compare, claims, targets, the recommend search) <- harness
(environment, launch, runner, noise floor, peak) and present (report, plots, texts, recipes) <-
cli (one module per command) and the pytest plugin. tests/test_layers.py enforces it.
"""
