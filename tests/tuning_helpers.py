"""Helpers shared by the tuning tests."""
from __future__ import annotations

import json

from explorer.events import CandidateMeasured


def measured_traces(tuner) -> list:
    """Run ``tuner`` and return the traces it measured, in order, as canonical JSON."""
    got = []
    tuner.events.subscribe(lambda e: got.append(json.dumps(e.trace, sort_keys=True))
                           if isinstance(e, CandidateMeasured) else None)
    tuner.run()
    return got
