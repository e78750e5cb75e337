"""``agentfsm report``: one self-contained HTML page for reviewing runs.

Built from transcripts, directories of them, batch results or replay output
(:mod:`agentfsm.report.inputs`): the observed state diagram as inline SVG
(:mod:`agentfsm.report.svg`), a sortable, filterable table of runs, each run's
timeline (:mod:`agentfsm.report.runs`), and the failures grouped by reason. The page
(:mod:`agentfsm.report.page`) needs no network and no server: it opens from disk.
"""

from agentfsm.report.build import ReportStats, build_report, write_report

__all__ = ["ReportStats", "build_report", "write_report"]
