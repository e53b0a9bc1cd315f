import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

# CLI and bench tests compare their output line for line: the warning that other
# processes hold the cores (explorer.measure.load) is tested in test_load.py alone
os.environ.setdefault("EXPLORER_BUSY_CHECK", "0")
