"""Running cases: environment facts, launching the worker in fresh processes (torchrun for ddp),
the run with its noise floor and lock, and the measured peak. Imports analysis, store, data, core;
starts the worker by module name, never imports it."""
