/**
 * The viewer page's stylesheet (inline in the page: nothing is fetched from elsewhere).
 */
export const style = String.raw`
  :root { --fg: #1d232a; --muted: #6a737d; --line: #e1e4e8; --accent: #0b5fff; --bad: #c62828; --ok: #1b7f3b; --warn: #a15c00;
    --session: #8792a2; --model: #0b5fff; --tool: #1b7f3b; --wait: #d98a00; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: #f7f8fa; }
  header { padding: 10px 18px; background: #fff; border-bottom: 1px solid var(--line); display: flex; gap: 16px; align-items: center; }
  header h1 { font-size: 16px; margin: 0; }
  header form { display: flex; gap: 6px; margin-left: auto; }
  input, select, button, textarea { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
  button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
  button:disabled { opacity: .5; cursor: default; }
  button.reject { background: #fff; color: var(--bad); border-color: var(--bad); }
  main { display: grid; grid-template-columns: 300px 1fr; gap: 0; height: calc(100vh - 50px); }
  #runs { border-right: 1px solid var(--line); overflow: auto; background: #fff; }
  #runs a { display: block; padding: 8px 12px; border-bottom: 1px solid var(--line); color: inherit; text-decoration: none; }
  #runs a.selected { background: #eef3ff; }
  #runs .meta { color: var(--muted); font-size: 12px; }
  .status { font-size: 11px; padding: 1px 6px; border-radius: 8px; border: 1px solid currentColor; }
  .status.running { color: var(--accent); } .status.completed { color: var(--ok); } .status.failed { color: var(--bad); }
  .status.interrupted, .status.waiting { color: var(--warn); }
  #detail { overflow: auto; padding: 14px 18px; }
  #detail h2 { font-size: 15px; margin: 0 0 10px; }
  .panels { display: grid; grid-template-columns: minmax(240px, 1fr) 3fr; gap: 16px; align-items: start; }
  section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
  section h3 { font-size: 13px; margin: 0 0 8px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
  ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 16px; }
  ul.tree { padding-left: 0; }
  ul.tree li { margin: 3px 0; }
  .session { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
  .counts { color: var(--muted); font-size: 12px; }
  #pending { margin-bottom: 16px; border-color: var(--wait); background: #fffaf0; }
  #pending h3 { color: var(--warn); }
  .request { border-top: 1px solid var(--line); padding: 8px 0; }
  .request:first-of-type { border-top: 0; }
  .request.sent { opacity: .6; }
  .request pre { margin: 6px 0; padding: 6px 8px; background: #fff; border: 1px solid var(--line); border-radius: 4px;
    font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; word-break: break-word; max-height: 240px; overflow: auto; }
  .request .controls { display: flex; gap: 6px; align-items: center; flex-wrap: wrap; }
  .request .controls input.reason { flex: 1; min-width: 160px; }
  .request .controls .answer { flex: 1; min-width: 200px; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
  .request .refusal { color: var(--bad); font-size: 12px; margin-top: 4px; white-space: pre-wrap; }
  .request .refusal:empty { display: none; }
  .wf { font-size: 12px; }
  .wf-row { display: grid; grid-template-columns: 260px 1fr; align-items: center; min-height: 20px; }
  .wf-row:hover { background: rgba(11, 95, 255, .06); }
  .wf-label { display: flex; gap: 6px; overflow: hidden; white-space: nowrap; padding-right: 8px; }
  .wf-label .name { overflow: hidden; text-overflow: ellipsis; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
  .wf-label .dur { margin-left: auto; color: var(--muted); }
  .wf-row.session .wf-label .name { font-weight: 600; font-family: inherit; }
  .wf-track { position: relative; height: 20px; }
  .wf-body { position: relative; }
  .wf-grid { position: absolute; top: 0; bottom: 0; left: 260px; right: 0; pointer-events: none; }
  .wf-grid span { position: absolute; top: 0; bottom: 0; border-left: 1px solid var(--line); }
  .wf-bar { position: absolute; top: 5px; height: 10px; min-width: 2px; border-radius: 2px; }
  .wf-bar.session { background: var(--session); top: 7px; height: 6px; }
  .wf-bar.model { background: var(--model); }
  .wf-bar.tool { background: var(--tool); }
  .wf-bar.wait { background: var(--wait); }
  .wf-bar.model.fellback { box-shadow: 0 0 0 2px var(--wait); }
  .wf-bar.guard { background: var(--bad); width: 6px; min-width: 6px; transform: translateX(-3px); }
  .wf-bar.guard.rewritten { background: var(--wait); }
  .input-parts { display: flex; flex-wrap: wrap; gap: 8px; align-items: flex-start; }
  .input-parts img.thumb { max-width: 160px; max-height: 120px; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
  .input-parts .part { font-size: 12px; color: var(--muted); border: 1px dashed var(--line); border-radius: 4px; padding: 4px 6px; word-break: break-all; max-width: 320px; }
  .input-parts .text { white-space: pre-wrap; }
  tr.warn td { color: var(--warn); }
  .wf-bar.error, .wf-bar.rejected, .wf-bar.failed, .wf-bar.unanswered { background: var(--bad); }
  .wf-bar.open { background-image: repeating-linear-gradient(45deg, rgba(255,255,255,.45) 0 4px, transparent 4px 8px); }
  .wf-axis .wf-track { height: 18px; }
  .wf-tick { position: absolute; top: 0; transform: translateX(-50%); color: var(--muted); font-size: 11px; white-space: nowrap; }
  .wf-tick:first-child { transform: none; }
  #wf-tip { position: fixed; z-index: 10; pointer-events: none; background: #1d232a; color: #fff; padding: 6px 8px; border-radius: 4px;
    font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; max-width: 480px; box-shadow: 0 2px 8px rgba(0,0,0,.2); }
  details.events { margin-top: 16px; }
  details.events summary { cursor: pointer; color: var(--muted); font-size: 13px; }
  table { width: 100%; border-collapse: collapse; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
  td { border-top: 1px solid var(--line); padding: 3px 6px; vertical-align: top; }
  td.t { color: var(--muted); white-space: nowrap; text-align: right; }
  td.k { white-space: nowrap; font-weight: 600; }
  td.s { white-space: nowrap; color: var(--muted); }
  td.x { white-space: pre-wrap; word-break: break-word; }
  tr.error td { color: var(--bad); }
  #output { white-space: pre-wrap; margin-top: 10px; }
  .empty { color: var(--muted); padding: 20px; }
`
