"""``soadyn.campaign``: the public face of capture campaigns (:mod:`soadyn.runtime.campaign`).

``run(spec | scenarios, n=None, client=None, results=...)``, ``replay(results, id)``,
``report(results)``, ``load_results(results)``, ``load_spec(path)``; see :mod:`soadyn.runtime.campaign`.
Needs the campaign extra (``pip install 'soadyn[campaign]'``); importing this module does not.
"""

from soadyn.runtime.campaign import (
    CampaignError,
    CampaignResult,
    CampaignWarning,
    MissingExtraError,
    load_results,
    replay,
    report,
    run,
    summary_table,
)
from soadyn.runtime.scenario import CampaignSpec, CampaignSpecError, Scenario, Setup, load_spec

__all__ = ["run", "replay", "report", "load_results", "summary_table", "load_spec", "CampaignResult",
           "CampaignSpec", "CampaignSpecError", "CampaignError", "CampaignWarning", "MissingExtraError",
           "Scenario", "Setup"]
