"""What the numbers mean: comparisons and the verdict, fits and crossovers, roofline,
change points and regressions, claims. Reads the store's values; never writes SQL."""
