"""The report's HTML page: one file with its style, script, diagram and data inline.

Nothing is fetched when the page opens: the SVG diagram is part of the page, the
script (``report.js``, vanilla, beside this module) and style (``report.css``) are
inlined, and the runs are one JSON document in a ``<script type="application/json">``
element that the script reads. The table is built from that data when the page
opens; a run's timeline only when it is opened, so a report of thousands of runs
opens as fast as its table.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from html import escape
from importlib.resources import files
from typing import Any

import orjson

__all__ = ["embed_json", "render_page"]

_HERE = files("agentfsm.report")


@cache
def _asset(name: str) -> str:
    return _HERE.joinpath(name).read_text(encoding="utf-8")


def embed_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element (no ``<``, ``>``, ``&``)."""
    try:
        raw = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # an integer past 64 bits (a transcript reads up to 4,300 digits): the standard library's
        raw = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=_as_orjson_writes).encode()
    return raw.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026").decode()


def _as_orjson_writes(value: Any) -> Any:
    """What orjson writes for a value the standard library's encoder does not know: a
    dataclass as its fields (``ToolChoice``), anything else as orjson would refuse it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON")


def render_page(data: dict[str, Any], svg: str) -> str:
    """The whole page for ``data`` (see :func:`agentfsm.report.build.page_data`) and its diagram."""
    title = escape(str(data.get("title", "agentfsm report")))
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="agentfsm report">
<title>{title}</title>
<style>{_asset("report.css")}</style>
</head>
<body>
<header>
<h1 id="title">{title}</h1>
<p id="overview"></p>
<ul id="notes"></ul>
</header>
<main>
<section id="diagram-section" aria-labelledby="diagram-heading">
<h2 id="diagram-heading">Observed state diagram</h2>
<p class="legend"><span class="key taken"></span> taken (width grows with the count)
<span class="key unused"></span> defined by the machine, never taken
<span class="key foreign"></span> not defined by the machine.
Click an edge to list the runs that took it.</p>
<div class="diagram">{svg}</div>
</section>
<section id="failures-section" aria-labelledby="failures-heading">
<h2 id="failures-heading">Failures by reason</h2>
<div id="failures"></div>
<h3>Corrections and stops by guard reason</h3>
<div id="corrections"></div>
</section>
<section id="runs-section" aria-labelledby="runs-heading">
<h2 id="runs-heading">Runs</h2>
<form class="filters" onsubmit="return false">
<label>Outcome <select id="filter-outcome"><option value="">all</option></select></label>
<label>Guard reason <select id="filter-reason"><option value="">any</option></select></label>
<label>Search <input id="filter-text" type="search" placeholder="run, task, prompt, error"></label>
<span id="filter-edge" hidden></span>
<span id="shown"></span>
</form>
<div class="table-wrap">
<table id="runs">
<thead><tr>
<th data-key="n" data-type="num">#</th>
<th data-key="id">run</th>
<th data-key="outcome">outcome</th>
<th data-key="reason">reason</th>
<th data-key="steps" data-type="num">steps</th>
<th data-key="corrections" data-type="num">corrections</th>
<th data-key="calls" data-type="num">model calls</th>
<th data-key="tokens" data-type="num">tokens</th>
<th data-key="seconds" data-type="num">seconds</th>
<th data-key="exhausted">exhausted</th>
<th data-key="error">errors</th>
</tr></thead>
<tbody></tbody>
</table>
</div>
<p id="more" hidden><button type="button" id="show-all">show all rows</button></p>
</section>
<section id="run-detail" aria-labelledby="run-title" hidden>
<h2 id="run-title"></h2>
<dl id="run-meta"></dl>
<ol id="timeline"></ol>
</section>
</main>
<script type="application/json" id="report-data">{embed_json(data)}</script>
<script>{_asset("report.js")}</script>
</body>
</html>
"""
