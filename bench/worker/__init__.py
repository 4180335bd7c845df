"""The per-rank measured loop, its strategies, loaders and samplers. Started by module name
(`python -m bench.worker`), never imported by the layers above; imports core and data only."""
