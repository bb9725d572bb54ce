"""The yield report: per site and stage, what came in, what was kept, what was dropped and why.

See :mod:`parasim.report.stage`.
"""

from parasim.report.stage import site_yield, write_report, yield_metrics, yield_table

__all__ = ["site_yield", "write_report", "yield_metrics", "yield_table"]
