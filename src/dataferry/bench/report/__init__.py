"""`dataferry bench report`: run the benchmark suite at a size that finishes in a few minutes on
two cores and write `docs/benchmarks.md` with its tables and plots (PNG, matplotlib), and the
raw results as JSON beside them. Every number in the page comes from this run.

`run` runs the stages, `plots` draws the figures, `page` fills the page's template
(`page.md`, package data) and writes everything.
"""

from .page import render_page, write_page
from .run import run_report
from .spec import S3_SERVER, ReportSpec

__all__ = ["S3_SERVER", "ReportSpec", "render_page", "run_report", "write_page"]
