"""Workload suites shipped with the package: one JSON file per suite (load_suite)."""
