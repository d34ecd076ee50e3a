"""Reading runs back: seed-clustered statistics, regret curves, the report's panels and tables, figures."""
