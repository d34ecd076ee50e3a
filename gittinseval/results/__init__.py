"""Reading runs back: seed-clustered statistics, regret curves, figures and the report."""
