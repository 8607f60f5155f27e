/**
 * The run viewer's page: one self-contained HTML document (inline CSS and script, nothing fetched from elsewhere),
 * reading the server's own routes — `GET /agents`, `GET /runs`, `POST /runs`, a run's events from
 * `GET /runs/:id/events` (read with `fetch`), and a waiting run's `POST /runs/:id/decisions/:toolCallId` and
 * `POST /runs/:id/answers/:questionId`, and `GET /runs/:id` for an input given as parts (images as thumbnails from their
 * own bytes; an image by http(s) URL is shown as its address, never fetched). On a server with a token the page is opened once as `/?token=<token>`: the
 * server answers with an HttpOnly cookie and the page without the token, and the page's requests carry the cookie.
 * Model and tool text is shown with `textContent` or in attributes, never as HTML. The style and the script's parts
 * are in `./viewer/`.
 */
import { base } from "./viewer/base.js"
import { input } from "./viewer/input.js"
import { pending } from "./viewer/pending.js"
import { run } from "./viewer/run.js"
import { style } from "./viewer/style.js"
import { waterfall } from "./viewer/waterfall.js"

export const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>valet runs</title>
<style>${style}</style>
</head>
<body>
<header>
  <h1>valet runs</h1>
  <span id="note" class="counts"></span>
  <form id="start">
    <select id="agent" aria-label="agent"></select>
    <input id="input" placeholder="Ask the agent…" size="40" aria-label="input">
    <button type="submit">Start</button>
  </form>
</header>
<main>
  <nav id="runs"><div class="empty">No runs yet.</div></nav>
  <div id="detail"><div class="empty">Select a run, or start one.</div></div>
</main>
<script>
"use strict";
${base}${waterfall}${pending}${input}${run}</script>
</body>
</html>
`
