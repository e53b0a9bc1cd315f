"""Data installed with the package as ``explorer.data`` (``explorer/data`` links here):
the workload suites (``*.json``) and a small example tuning database
(``example_db/``). Read them through ``explorer.suites``; see README.md here."""
