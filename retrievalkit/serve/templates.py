"""The pages of ``retrievalkit serve`` as Jinja2 templates that escape every value they insert.

Autoescaping is on for every template, and nothing is marked safe: a question, an id, a
document's text or an option value is always text, in an element or in a quoted
attribute. Links are built by `url` (query values percent-encoded, then escaped). The
page's only script and style sheet are served from /static (the Content-Security-Policy
allows no inline script), and charts are SVG written here.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import jinja2

from retrievalkit.formats.numbers import (
    NONE,
    difference_and_interval,
    mean_and_interval,
    number,
    signed,
)
from retrievalkit.formats.numbers import p_text as pvalue

BASE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{% block title %}retrievalkit{% endblock %} · retrievalkit serve</title>
<link rel="stylesheet" href="/static/serve.css">
<script src="/static/serve.js" defer></script>
</head>
<body data-page="{{ page }}">
<header>
<a class="home" href="/">retrievalkit</a>
<a class="home" href="/drift">drift</a>
{% if pool_name %}<a class="home" id="pool-link" href="/judge">grade the pool {{ pool_name }}</a>{% endif %}
<span class="store">store <code>{{ store_url }}</code></span>
{% if read_only %}<span class="badge read-only" id="read-only">read-only: {{ read_only }}</span>{% endif %}
</header>
<main>
{% block body %}{% endblock %}
</main>
</body>
</html>
"""

KEYS = """{% extends "base" %}
{% block title %}runs{% endblock %}
{% block body %}
<h1>Sets and retrievers</h1>
{% if not keys %}<p id="empty">No runs in this store yet: <code>retrievalkit eval</code> saves one.</p>{% endif %}
<table id="keys">
<thead><tr><th>set</th><th>retriever</th><th>runs</th><th>newest run</th></tr></thead>
<tbody>
{% for row in keys %}
<tr>
<td><a class="history-link" href="{{ url('/history', set=row.set_name, retriever=row.model) }}">{{ row.set_name }}</a></td>
<td>{{ row.model }}</td>
<td class="number">{{ row.runs }}</td>
<td><code>{{ row.newest_run_id }}</code> <span class="muted">{{ row.newest_created_at }}</span></td>
</tr>
{% endfor %}
</tbody>
</table>
{% endblock %}
"""

HISTORY = """{% extends "base" %}
{% block title %}history of {{ set_name }} × {{ retriever }}{% endblock %}
{% block body %}
<h1>History <span class="key">{{ set_name }} × {{ retriever }}</span></h1>
<form method="get" action="/history" class="choices" id="choices">
<input type="hidden" name="set" value="{{ set_name }}">
<input type="hidden" name="retriever" value="{{ retriever }}">
<label>metric <select name="metric" class="auto-submit">
{% for name in metrics %}<option value="{{ name }}"{% if name == metric %} selected{% endif %}>{{ name }}</option>{% endfor %}
</select></label>
<label>slice <select name="slice" class="auto-submit" id="slice">
<option value=""{% if not slice %} selected{% endif %}>all questions</option>
{% for name in slices %}<option value="{{ name }}"{% if name == slice %} selected{% endif %}>{{ name }}</option>{% endfor %}
</select></label>
<button type="submit">show</button>
</form>
{% set c = chart %}
<figure>
<svg class="chart" id="trend" role="img" width="{{ c.width }}" height="{{ c.height }}" viewBox="0 0 {{ c.width }} {{ c.height }}" xmlns="http://www.w3.org/2000/svg">
<title>{{ c.title }} over {{ c.runs }} runs</title>
<text x="{{ c.left }}" y="18" class="chart-title">{{ c.title }}: mean with its interval, {{ c.runs }} runs, oldest left</text>
{% for tick in c.yticks %}
<line x1="{{ c.left }}" x2="{{ c.right }}" y1="{{ tick.y }}" y2="{{ tick.y }}" stroke="#e3e3e3"/>
<text x="{{ c.left - 6 }}" y="{{ tick.y }}" text-anchor="end" dominant-baseline="middle" class="tick">{{ tick.label }}</text>
{% endfor %}
{% if c.band %}<polygon points="{{ c.band }}" fill="#4c78a8" fill-opacity="0.18" stroke="none"/>{% endif %}
<path d="{{ c.line }}" fill="none" stroke="#4c78a8" stroke-width="2"/>
{% for m in c.markers %}
{% if m.pinned %}<g class="pinned-marker"><circle cx="{{ m.x }}" cy="{{ m.y }}" r="7" fill="#f58518"/><text x="{{ m.x }}" y="{{ c.top - 4 }}" text-anchor="middle" class="tick">baseline</text><line x1="{{ m.x }}" x2="{{ m.x }}" y1="{{ c.top }}" y2="{{ c.bottom }}" stroke="#f58518" stroke-dasharray="4 3"/><title>{{ m.hover }}</title></g>
{% else %}<circle class="run-marker" cx="{{ m.x }}" cy="{{ m.y }}" r="{{ 2 if c.small else 4 }}" fill="#4c78a8"><title>{{ m.hover }}</title></circle>{% endif %}
{% endfor %}
<text x="{{ c.left }}" y="{{ c.height - 12 }}" class="tick">{{ c.first }}</text>
<text x="{{ c.right }}" y="{{ c.height - 12 }}" text-anchor="end" class="tick">{{ c.last }}</text>
</svg>
</figure>
<p class="muted">{{ total }} runs{% if pinned %}; pinned baseline <code>{{ pinned }}</code>{% endif %}. Gate thresholds (largest allowed drop):
{% for name, value in thresholds|dictsort %}{{ name }} {{ "%.3f"|format(value) }}{% if not loop.last %}, {% endif %}{% endfor %}.
Verdicts for the newest runs; each row's changes since the run before it are under "changes".</p>
<table id="runs">
<thead><tr><th>run</th><th>when</th>{% for name in trend %}<th>{{ name }}</th>{% endfor %}<th>questions</th><th>verdict</th><th>changes</th><th></th></tr></thead>
<tbody>
{% for row in rows %}{% set e = row.entry %}
<tr class="run-row{% if e.pinned %} pinned{% endif %}">
<td><code>{{ e.run_id }}</code>{% if e.pinned %} <span class="badge">baseline</span>{% endif %}</td>
<td class="muted">{{ e.created_at }}</td>
{% for name in trend %}<td class="number">{{ number(e.metrics.get(name)) }}</td>{% endfor %}
<td class="number">{{ e.questions }}{% if e.errored %} ({{ e.errored }} errored){% endif %}</td>
<td class="{{ 'regressed' if row.verdict.regressed else 'passed' if row.verdict.regressed is false else '' }}">{{ row.verdict.text }}</td>
<td>{% if e.changes %}<details><summary>{{ e.changes|length }} changed</summary><ul>
{% for change in e.changes %}<li><b>{{ change.field }}</b>: {{ change.before or dash }} → {{ change.after or dash }}{% for line in change.what %}<br><span class="muted">{{ line }}</span>{% endfor %}</li>{% endfor %}
</ul></details>{% else %}<span class="muted">{{ dash }}</span>{% endif %}</td>
<td class="actions">
{% if row.previous %}<a class="compare-link" href="{{ url('/compare', run=e.run_id, other=row.previous) }}">compare with previous</a>{% endif %}
{% if pinned and pinned != e.run_id %}<a href="{{ url('/compare', run=e.run_id, other=pinned) }}">with baseline</a>{% endif %}
<a class="judge-link" href="{{ url('/judge', run=e.run_id) }}">judge</a>
{% if not e.pinned %}<form method="post" action="/pin" class="inline"><input type="hidden" name="csrf" value="{{ csrf }}"><input type="hidden" name="run" value="{{ e.run_id }}"><button type="submit"{% if read_only %} disabled title="the store is read-only"{% endif %}>pin</button></form>{% endif %}
</td>
</tr>
{% endfor %}
</tbody>
</table>
{% if total > limit %}<p><a href="{{ url('/history', set=set_name, retriever=retriever, metric=metric, slice=slice, limit=total) }}">show all {{ total }} runs</a></p>{% endif %}
{% endblock %}
"""

COMPARE = """{% extends "base" %}
{% block title %}compare {{ candidate.run_id }}{% endblock %}
{% block body %}
<h1>Compare</h1>
<form method="get" action="/compare" class="choices" id="choose-runs">
<label>candidate <select name="run" id="candidate-choice">
{% for run_id, label in choices %}<option value="{{ run_id }}"{% if run_id == candidate.run_id %} selected{% endif %}>{{ label }}</option>{% endfor %}
</select></label>
<label>against <select name="other" id="baseline-choice">
{% for run_id, label in choices %}<option value="{{ run_id }}"{% if run_id == baseline.run_id %} selected{% endif %}>{{ label }}</option>{% endfor %}
</select></label>
<button type="submit" id="compare-button">compare</button>
</form>
<p>candidate <code>{{ candidate.run_id }}</code> ({{ candidate.model }}) against baseline <code>{{ baseline.run_id }}</code> ({{ baseline.model }}), set {{ comparison.set_name }}:
{{ comparison.shared_questions }} questions in both, {{ "%.0f"|format(comparison.confidence * 100) }} % paired intervals, sign-flip permutation p-values.</p>
{% for warning in comparison.warnings %}<p class="warning">{{ warning }}</p>{% endfor %}
{% if pair %}
<table id="deltas">
<thead><tr><th>metric</th><th>baseline</th><th>candidate</th><th>difference</th><th>interval</th><th>p</th><th>verdict</th><th>wins</th><th>ties</th><th>losses</th></tr></thead>
<tbody>
{% for d in pair.metrics %}
<tr class="{{ 'better' if d.difference and d.difference > 0 and d.significant else 'worse' if d.difference and d.difference < 0 and d.significant else '' }}">
<td>{{ d.metric }}</td><td class="number">{{ number(d.baseline) }}</td><td class="number">{{ number(d.candidate) }}</td>
<td class="number">{{ signed(d.difference) }}</td>
<td class="number">{% if d.ci %}[{{ signed(d.ci[0]) }}, {{ signed(d.ci[1]) }}]{% else %}{{ dash }}{% endif %}</td>
<td class="number">{{ pvalue(d.p_value) }}</td><td>{{ d.verdict or dash }}</td>
<td class="number">{{ d.wins }}</td><td class="number">{{ d.ties }}</td><td class="number">{{ d.losses }}</td>
</tr>
{% endfor %}
</tbody>
</table>
<h2>The questions that moved most ({{ pair.changed_by }})</h2>
<table id="changed">
<thead><tr><th>question</th><th></th><th>baseline</th><th>candidate</th><th>first relevant rank</th></tr></thead>
<tbody>
{% for q in pair.changed %}
<tr>
<td><a class="question-link" href="{{ url('/question', run=candidate.run_id, id=q.question_id, other=baseline.run_id) }}"><code>{{ q.question_id }}</code></a></td>
<td>{{ q.question or "" }}</td>
<td class="number">{{ number(q.baseline) }}</td><td class="number">{{ number(q.candidate) }}</td>
<td class="number">{{ q.baseline_rank or dash }} → {{ q.candidate_rank or dash }}</td>
</tr>
{% else %}<tr><td colspan="5" class="muted">No question changed.</td></tr>
{% endfor %}
</tbody>
</table>
{% endif %}
{% if stages %}{% set st = stages %}
<section id="stages">
<h2>Stages</h2>
<p class="muted">Each stage of the retriever scored on every question (mean with its interval); "step" is the
paired difference from the run's stage before, "candidate − baseline" the paired difference between the runs on that
stage over the {{ st.shared_questions }} questions both have (p-values not corrected across stages).
{% if not st.baseline_order %}The baseline has no stages.{% elif not st.candidate_order %}The candidate has no stages.{% endif %}</p>
<table id="stage-metrics">
<thead><tr><th>stage</th><th>metric</th><th>baseline</th><th>step</th><th>candidate</th><th>step</th><th>candidate − baseline</th><th>p</th><th>verdict</th></tr></thead>
<tbody>
{% for row in st.rows %}{% set d = row.between %}
<tr class="stage-row{% if d and d.significant and d.difference and d.difference > 0 %} better{% elif d and d.significant and d.difference and d.difference < 0 %} worse{% endif %}" data-metric="{{ row.metric }}">
<td class="stage-name">{% if loop.first or loop.previtem.stage != row.stage %}<code>{{ row.stage }}</code>{% endif %}</td>
<td>{{ row.metric }}</td>
<td class="number">{{ mean_ci(row.baseline) }}</td><td class="number">{{ step(row.baseline_step) }}</td>
<td class="number">{{ mean_ci(row.candidate) }}</td><td class="number">{{ step(row.candidate_step) }}</td>
<td class="number between">{% if d %}{{ signed(d.difference) }}{% if d.ci %} [{{ signed(d.ci[0]) }}, {{ signed(d.ci[1]) }}]{% endif %}{% else %}{{ dash }}{% endif %}</td>
<td class="number">{{ pvalue(d.p_value) if d else dash }}</td><td>{{ d.verdict or dash if d else dash }}</td>
</tr>
{% endfor %}
</tbody>
</table>
<h2>Where the right document was lost</h2>
<p class="muted">Each question the answer misses put down to the stage that lost it (top {{ st.baseline_k or dash }} in the baseline, top {{ st.candidate_k or dash }} in the candidate); rescues are questions a later stage brought back.</p>
<table id="stage-attribution">
<thead><tr><th>what happened</th><th>baseline</th><th>candidate</th></tr></thead>
<tbody>
{% for label, before, after in st.attribution %}<tr><td>{{ label }}</td><td class="number">{{ before }}</td><td class="number">{{ after }}</td></tr>
{% else %}<tr><td colspan="3" class="muted">No miss or rescue to put down to a stage.</td></tr>
{% endfor %}
</tbody>
</table>
{% if st.questions %}
<table id="stage-questions">
<thead><tr><th>question</th><th></th><th>baseline</th><th>candidate</th></tr></thead>
<tbody>
{% for q in st.questions[:stage_questions] %}
<tr class="{{ 'changed' if q.changed else '' }}">
<td><a class="question-link" href="{{ url('/question', run=candidate.run_id, id=q.question_id, other=baseline.run_id) }}"><code>{{ q.question_id }}</code></a></td>
<td>{{ q.question or "" }}</td>
<td>{{ q.baseline or dash }}</td><td>{{ q.candidate or dash }}</td>
</tr>
{% endfor %}
</tbody>
</table>
{% if st.questions|length > stage_questions %}<p class="muted">and {{ st.questions|length - stage_questions }} more questions with a stage to blame (those whose stage changed are listed first).</p>{% endif %}
{% endif %}
</section>
{% endif %}
<p><a href="{{ url('/history', set=candidate.set, retriever=candidate.model) }}">history of {{ candidate.set }} × {{ candidate.model }}</a> ·
<a class="judge-link" href="{{ url('/judge', run=candidate.run_id) }}">judge the candidate's unjudged documents</a></p>
{% endblock %}
"""

QUESTION = """{% extends "base" %}
{% block title %}question {{ question_id }}{% endblock %}
{% block body %}
<h1>Question <code>{{ question_id }}</code></h1>
<blockquote id="question-text">{{ question_text if question_text is not none else "(the question's text: its set was not found here)" }}</blockquote>
<dl class="facts">
<dt>form</dt><dd>{{ outcome.form.value if outcome.form else dash }}</dd>
<dt>hard class</dt><dd>{{ outcome.hard_class or dash }}</dd>
{% if question %}{% for name, value in question.meta|dictsort %}<dt>{{ name }}</dt><dd>{{ value }}</dd>{% endfor %}{% endif %}
<dt>labels</dt><dd id="labels">{% for doc, grade in labels %}<code>{{ doc }}</code> {{ grade }}{% if not loop.last %}, {% endif %}{% else %}none (a no-answer question){% endfor %}</dd>
</dl>
{% if not has_corpus %}<p class="muted">No corpus is known for this retriever: start serve with --corpus to see the documents' text.</p>{% endif %}
<div class="rankings">
{% for ranking in rankings %}
<section class="ranking">
<h2>{{ ranking.record.model }} <code>{{ ranking.record.run_id }}</code></h2>
{% if ranking.error %}<p class="warning">error: {{ ranking.error }}</p>{% endif %}
<p class="muted">{% for name, value in ranking.scores|dictsort %}{{ name }} {{ number(value) }}{% if not loop.last %} · {% endif %}{% endfor %}</p>
{% if not ranking.documents %}<p class="muted">Nothing retrieved.</p>{% endif %}
<ol>
{% for d in ranking.documents %}
<li class="doc{% if d.expected %} expected{% endif %}{% if d.grade is none and d.human is none %} unjudged{% endif %}">
<code>{{ d.document_id }}</code>
{% if d.expected %}<span class="badge good">expected</span>{% elif d.grade is not none %}<span class="badge">grade {{ d.grade }}</span>{% elif d.human is not none %}<span class="badge human">graded {{ d.human }} by a person</span>{% else %}<span class="badge unjudged">unjudged</span>{% endif %}
{% if d.title %}<b>{{ d.title }}</b>{% endif %}
{% if d.snippet %}<div class="snippet">{{ d.snippet }}</div>{% endif %}
</li>
{% endfor %}
</ol>
</section>
{% endfor %}
</div>
<p><a class="judge-link" href="{{ url('/judge', run=record.run_id) }}">judge this run's unjudged documents</a></p>
{% endblock %}
"""

JUDGE = """{% extends "base" %}
{% block title %}{% if pool %}grade the pool {{ pool.name }}{% else %}judge {{ record.run_id }}{% endif %}{% endblock %}
{% block body %}
{% if pool %}<h1>Grade the pool <code id="pool-name">{{ pool.name }}</code> <span class="key" id="pairs-left">{{ progress.total - progress.graded }} pairs left</span></h1>
{% else %}<h1>Judge <code>{{ record.run_id }}</code> <span class="key">{{ record.set }} × {{ record.model }}</span></h1>{% endif %}
<div class="progress-line" id="progress">
<progress max="{{ progress.total }}" value="{{ progress.graded }}"></progress>
<span id="progress-text">{{ progress.graded }} of {{ progress.total }} graded ({{ "%.0f"|format(progress.share * 100) }} %)</span>
<span class="muted">{% if pool %}the pool's (question, document) pairs, best first by priority{% else %}the unjudged documents in the top {{ k }}{% if sample %} and {{ sample }} the set judges, for agreement{% endif %}{% endif %};
{% for name, count in progress.by_grader|dictsort %}{{ name }} {{ count }}{% if not loop.last %}, {% endif %}{% endfor %}{% if progress.disagreements %}; <span class="warning">{{ progress.disagreements }} graded differently by two people</span>{% endif %}</span>
</div>
<form method="post" action="/judge/name" class="choices" id="name-form">
<input type="hidden" name="csrf" value="{{ csrf }}">
<input type="hidden" name="next" value="{{ url('/judge', run=run_id, k=k, sample=sample) }}">
<label>your name <input name="grader" value="{{ grader }}" maxlength="40" pattern="[A-Za-z0-9_.@ \\-]{1,40}" required></label>
<button type="submit">{{ "change" if grader else "start judging" }}</button>
</form>
{% if writable %}<p class="warning" id="not-writable">Grades cannot be saved: {{ writable }}.</p>{% endif %}
{% if not grader %}
<p>Give your name first: it is written with every grade you give.</p>
{% elif item is none %}
<p id="done">Every document of the queue is graded. The grades are in <code>{{ labels_path }}</code>: <code>retrievalkit eval --extra-labels {{ labels_path }}</code> scores with them.</p>
{% else %}
<section class="judging" id="item">
<p class="muted">question {% if question_run %}<a href="{{ url('/question', run=question_run, id=item.question_id) }}">{% endif %}<code id="item-question">{{ item.question_id }}</code>{% if question_run %}</a>{% endif %}, document <code id="item-document">{{ item.document_id }}</code>{% if pool %}, pair {{ item.position + 1 }} of the pool{% if item.priority is not none %} (priority {{ number(item.priority) }}){% endif %}{% if item.rank is not none %}, best rank {{ item.rank }}{% endif %}{% else %} at rank {{ item.rank }}{% endif %}{% if item.set_grade is not none %} (sampled from the set's judged documents){% endif %}</p>
<blockquote>{{ question_text if question_text is not none else "(the question's text: its set was not found here)" }}</blockquote>
<article class="document">
{% if document %}<h2>{{ document.title }}</h2><div class="document-text">{{ document.text }}</div>
{% else %}<p class="muted">{{ "This document is not in the corpus." if has_corpus else ("No corpus is known for this pool: start serve with --corpus." if pool else "No corpus is known for this retriever: start serve with --corpus.") }}</p>{% endif %}
</article>
{% if current %}<p class="muted">graded {{ current.grade }} by {{ current.model }} at {{ current.judged_at }}; a new grade is added after it and counts instead.</p>{% endif %}
{% if model_grade is not none %}<p class="muted">a model judge graded it {{ model_grade }}</p>{% endif %}
<form method="post" action="/judge/grade" id="grade-form">
<input type="hidden" name="csrf" value="{{ csrf }}">
<input type="hidden" name="run" value="{{ run_id }}">
<input type="hidden" name="k" value="{{ k }}">
<input type="hidden" name="sample" value="{{ sample }}">
<input type="hidden" name="question" value="{{ item.question_id }}">
<input type="hidden" name="document" value="{{ item.document_id }}">
<div class="grades">
{% for name in grade_names %}<button type="submit" name="grade" value="{{ loop.index0 }}" class="grade"{% if writable %} disabled{% endif %}><kbd>{{ loop.index0 }}</kbd> {{ name }}</button>{% endfor %}
</div>
</form>
<p class="muted">Keys <kbd>0</kbd> to <kbd>3</kbd> grade the document shown.</p>
{% endif %}
</section>
<h2>Agreement</h2>
{% macro agreement_table(found, whom) %}{% set grades, relevance, n = found %}
<p>with {{ whom }} on {{ n }} documents: kappa {{ number(grades.kappa) }} on grades, {{ number(relevance.kappa) }} on relevant / not relevant; exact agreement {{ number(grades.observed) }}.</p>
{% endmacro %}
<div id="agreement">
{% if model_agreement %}{{ agreement_table(model_agreement, "the model judge") }}{% else %}<p class="muted">No document graded here has a model judge's grade (give them with --judge-labels, from retrievalkit judge).</p>{% endif %}
{% if set_agreement %}{{ agreement_table(set_agreement, "the set's own labels") }}{% endif %}
</div>
{% if recent %}<h2>Your last grades</h2><ul id="recent">
{% for label in recent %}<li><a href="{{ url('/judge', run=run_id, k=k, sample=sample, q=label.question_id, doc=label.document_id) }}"><code>{{ label.question_id }}</code> / <code>{{ label.document_id }}</code></a>: {{ label.grade }} <span class="muted">{{ label.judged_at }}</span></li>
{% endfor %}</ul>{% endif %}
{% endblock %}
"""

LOGIN = """{% extends "base" %}
{% block title %}sign in{% endblock %}
{% block body %}
<h1>Sign in</h1>
{% if failed %}<p class="warning" id="login-failed">That is not the token this server was started with.</p>{% endif %}
<form method="post" action="/login">
<input type="hidden" name="csrf" value="{{ csrf }}">
<label>token (RETRIEVALKIT_SERVE_TOKEN of the server) <input type="password" name="token" autocomplete="current-password" required></label>
<button type="submit">sign in</button>
</form>
{% endblock %}
"""

DRIFT = """{% extends "base" %}
{% block title %}drift{% endblock %}
{% block body %}
<h1>Drift on query logs</h1>
{% if not drifts %}<p id="empty">No drift records in this store yet: <code>retrievalkit drift</code> saves one.</p>{% endif %}
{% if chosen %}
<h2 id="drift-title">{{ chosen.candidate }} against {{ chosen.baseline }}</h2>
<p class="muted">{{ chosen.queries }} distinct queries ({{ chosen.logged }} logged) from <code>{{ chosen.log }}</code>, {{ chosen.created_at }}{% if chosen.gated %}: drift gate <b id="drift-gate">{{ "passed" if chosen.passed else "failed" }}</b>{% endif %}</p>
{% if chosen.failures %}<ul id="drift-failures">{% for failure in chosen.failures %}<li>{{ failure }}</li>{% endfor %}</ul>{% endif %}
<table id="drift-measures">
<thead><tr><th>measure</th><th>baseline</th><th>candidate</th><th>value / difference</th><th>interval</th></tr></thead>
<tbody>
{% for row in rows %}<tr><td>{{ row[0] }}</td>{% for cell in row[1:] %}<td class="number">{{ cell }}</td>{% endfor %}</tr>
{% endfor %}
</tbody>
</table>
<h2>The queries that moved most</h2>
{% if not chosen.moved %}<p class="muted" id="drift-none-moved">No query has a defined rank-biased overlap.</p>{% endif %}
<table id="drift-moved">
<thead><tr><th>query</th><th>weight</th><th>rbo</th><th>overlap@{{ k }}</th><th>baseline top</th><th>candidate top</th></tr></thead>
<tbody>
{% for row in chosen.moved %}<tr>
<td>{{ row.query }}</td><td class="number">{{ "%g" | format(row.weight) }}</td><td class="number">{{ number(row.rbo) }}</td>
<td class="number">{{ number(row.get("overlap@" ~ k)) }}</td>
<td><code>{{ row.baseline[:3] | join(", ") or dash }}</code></td><td><code>{{ row.candidate[:3] | join(", ") or dash }}</code></td>
</tr>{% endfor %}
</tbody>
</table>
{% endif %}
{% if drifts | length > 1 %}
<h2>Every drift record</h2>
<ul id="drift-records">
{% for record in drifts %}<li><a href="{{ url('/drift', id=record.drift_id) }}">{{ record.candidate }} against {{ record.baseline }}</a> <span class="muted">{{ record.created_at }}</span></li>{% endfor %}
</ul>
{% endif %}
{% endblock %}
"""

ERROR = """{% extends "base" %}
{% block title %}{{ status }}{% endblock %}
{% block body %}
<h1>{{ status }}</h1>
<p id="error-message">{{ message }}</p>
<p><a href="/">all sets and retrievers</a></p>
{% endblock %}
"""

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
header { display: flex; gap: 1em; align-items: baseline; padding: .6em 1.5em; background: #24292f; color: #eee; }
header a.home { color: #fff; font-weight: 700; text-decoration: none; }
header code { color: #ddd; }
main { padding: 1em 1.5em 3em; max-width: 1200px; }
h1 { font-size: 1.5em; margin: .3em 0 .6em; } h2 { font-size: 1.15em; margin-top: 1.4em; }
.key { font-weight: 400; color: #555; }
table { border-collapse: collapse; background: #fff; margin: .5em 0; }
th, td { padding: .3em .6em; border-bottom: 1px solid #e5e5e5; text-align: left; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #666; } .warning { color: #9a3412; } .regressed { color: #b91c1c; font-weight: 600; } .passed { color: #15803d; }
tr.better td { background: #f0fdf4; } tr.worse td { background: #fef2f2; } tr.pinned td { background: #fff7ed; }
.badge { display: inline-block; padding: 0 .45em; border-radius: .6em; background: #e5e7eb; font-size: .82em; }
.badge.good { background: #dcfce7; } .badge.unjudged { background: #fde68a; } .badge.human { background: #dbeafe; }
.badge.read-only { background: #fecaca; color: #7f1d1d; }
.choices { display: flex; gap: 1em; align-items: center; margin: .5em 0 1em; flex-wrap: wrap; }
form.inline { display: inline; }
.actions a { margin-right: .6em; white-space: nowrap; }
.chart { background: #fff; border: 1px solid #e5e5e5; max-width: 100%; height: auto; }
.chart-title { font-size: 13px; font-weight: 600; fill: #333; } .tick { font-size: 11px; fill: #555; }
figure { margin: 0; }
blockquote { margin: .4em 0 1em; padding: .6em 1em; background: #fff; border-left: 4px solid #4c78a8; font-size: 1.1em; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2em 1em; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
.rankings { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 1em; }
.ranking { background: #fff; border: 1px solid #e5e5e5; padding: .2em 1em; }
tr.changed td { background: #fffbeb; } td.stage-name code, #stage-metrics td.number { white-space: nowrap; }
li.doc { margin: .4em 0; } li.expected { background: #f0fdf4; } li.unjudged { background: #fffbeb; }
.snippet { color: #444; font-size: .92em; }
.document { background: #fff; border: 1px solid #e5e5e5; padding: .4em 1.2em 1em; max-height: 24em; overflow: auto; }
.document-text { white-space: pre-wrap; }
.grades { display: flex; gap: .6em; margin: 1em 0 .4em; flex-wrap: wrap; }
button.grade { font-size: 1em; padding: .5em .9em; border-radius: .4em; border: 1px solid #9ca3af; background: #fff; cursor: pointer; }
button.grade:hover { background: #eef2ff; }
kbd { border: 1px solid #aaa; border-radius: 3px; padding: 0 .3em; background: #f7f7f7; font-family: ui-monospace, monospace; }
progress { width: 18em; height: 1em; vertical-align: middle; }
.progress-line { display: flex; gap: 1em; align-items: center; flex-wrap: wrap; }
"""

SCRIPT = """
(function () {
  "use strict";
  document.querySelectorAll("select.auto-submit").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
  var form = document.getElementById("grade-form");
  if (!form) { return; }
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT")) { return; }
    if (!/^[0-3]$/.test(event.key)) { return; }
    var button = form.querySelector('button[name="grade"][value="' + event.key + '"]');
    if (!button || button.disabled) { return; }
    event.preventDefault();
    form.requestSubmit(button);
  });
})();
"""


def url(path: str, **parameters: Any) -> str:
    """A path with its query, every value percent-encoded (empty values left out)."""
    query = urllib.parse.urlencode(
        {name: str(value) for name, value in parameters.items() if value not in (None, "")}
    )
    return f"{path}?{query}" if query else path


def mean_ci(value: Any) -> str:
    """A `MetricValue` as ``0.512 [0.401, 0.620]``; ``–`` for None or an undefined mean."""
    return NONE if value is None else mean_and_interval(value.mean, value.ci)


def step(delta: Any) -> str:
    """A `StageDelta` as ``+0.012 [-0.010, +0.034]``; ``–`` for a first stage."""
    return NONE if delta is None else difference_and_interval(delta.difference, delta.ci)


def environment() -> jinja2.Environment:
    """The templates, autoescaped, with the helpers they call."""
    loader = jinja2.DictLoader(
        {
            "base": BASE,
            "keys": KEYS,
            "history": HISTORY,
            "compare": COMPARE,
            "question": QUESTION,
            "judge": JUDGE,
            "login": LOGIN,
            "error": ERROR,
            "drift": DRIFT,
        }
    )
    env = jinja2.Environment(
        loader=loader, autoescape=True, undefined=jinja2.StrictUndefined, auto_reload=False
    )
    env.globals.update(
        url=url, dash=NONE, number=number, signed=signed, pvalue=pvalue, mean_ci=mean_ci, step=step
    )
    return env
