"""What a person reads: the report and its tables, plots, texts in English and Chinese, the
recommend output and the recipe scripts. Imports analysis, store and core only."""
