"""The yield report: per site and stage, what came in, what was kept, what was dropped and why.

See :mod:`parasim.report.stage`.
"""

from parasim.report.stage import STAGES, site_yield, sum_counts, write_report, yield_table

__all__ = ["STAGES", "site_yield", "sum_counts", "write_report", "yield_table"]
