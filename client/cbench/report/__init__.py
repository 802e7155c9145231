"""Static HTML report of bench results (``cbench report``) and submissions (``cbench submit``).

May import: ``cbench.scoring`` and everything below it; not the other user-level jobs.
"""

from cbench.report.site import build_report
from cbench.report.submit import submit

__all__ = ["build_report", "submit"]
