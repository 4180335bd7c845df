"""`python -m bench ...`: one module per command; main.py maps every refusal to its exit code."""
