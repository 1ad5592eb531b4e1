/**
 * The dashboard's stylesheet and script, served from the package itself (no build step, no CDN).
 * The script only asks for confirmation before an action; every page works without it.
 */
export const DASHBOARD_CSS = `
:root { --fg:#1d2330; --muted:#5b6475; --line:#d9dee7; --bg:#f6f7f9; --accent:#2456c7; --bad:#b3261e; --ok:#1f7a3a; --warn:#9a6700; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
header { background:#1d2330; color:#fff; padding:10px 20px; display:flex; gap:20px; align-items:center; }
header a { color:#fff; text-decoration:none; font-weight:600; }
header .brand { font-size:16px; margin-right:12px; }
main { padding:16px 20px 40px; max-width:1400px; }
h1 { font-size:20px; margin:6px 0 14px; } h2 { font-size:16px; margin:22px 0 8px; }
table { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#eef1f5; font-weight:600; font-size:12px; text-transform:uppercase; letter-spacing:.03em; color:var(--muted); }
a { color:var(--accent); }
.state { display:inline-block; padding:1px 7px; border-radius:9px; font-size:12px; background:#e7eaf0; }
.state-finished, .state-completed, .state-consumed { background:#dcf2e3; color:var(--ok); }
.state-failed, .state-canceled { background:#fbe1df; color:var(--bad); }
.state-paused, .state-waiting, .state-pending { background:#fff1cc; color:var(--warn); }
.state-performing, .state-in_progress, .state-scheduled, .state-claimed { background:#dfe8fb; color:var(--accent); }
.cards { display:flex; gap:12px; flex-wrap:wrap; }
.card { background:#fff; border:1px solid var(--line); padding:10px 14px; min-width:170px; }
.card b { display:block; font-size:22px; }
.card.alert b { color:var(--bad); }
.muted { color:var(--muted); }
pre { margin:0; white-space:pre-wrap; word-break:break-word; font:12px/1.4 ui-monospace, Menlo, Consolas, monospace; }
form.filters { display:flex; flex-wrap:wrap; gap:8px; align-items:end; background:#fff; border:1px solid var(--line); padding:10px; margin-bottom:12px; }
form.filters label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); }
input, select, textarea, button { font:inherit; padding:4px 6px; }
button { cursor:pointer; background:var(--accent); color:#fff; border:0; border-radius:3px; padding:5px 12px; }
button.danger { background:var(--bad); }
.actions { display:flex; gap:8px; flex-wrap:wrap; align-items:start; margin:10px 0; }
.actions form { margin:0; }
.signal-form { background:#fff; border:1px solid var(--line); padding:10px; display:flex; gap:8px; flex-wrap:wrap; align-items:end; }
.signal-form textarea { width:360px; height:60px; }
.message { padding:8px 12px; margin:8px 0; border:1px solid; }
.message.error { background:#fbe1df; border-color:var(--bad); color:var(--bad); }
.message.notice { background:#dcf2e3; border-color:var(--ok); color:var(--ok); }
ol.steps { display:flex; gap:6px; list-style:none; padding:0; flex-wrap:wrap; }
ol.steps li { background:#fff; border:1px solid var(--line); padding:4px 10px; }
ol.steps li.current { border-color:var(--accent); background:#dfe8fb; font-weight:600; }
ol.steps li.done { color:var(--muted); }
ol.steps li.removed { border-style:dashed; color:var(--muted); }
.badge { display:inline-block; padding:0 6px; margin-left:4px; border-radius:9px; font-size:11px; font-weight:400; background:#e7eaf0; color:var(--muted); }
.badge-not-defined { background:#fbe1df; color:var(--bad); }
.resume-at-form { background:#fff; border:1px solid var(--line); padding:10px; display:flex; gap:8px; flex-wrap:wrap; align-items:end; margin:10px 0; }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:2px 14px; margin:0; }
dl.facts dt { color:var(--muted); }
details summary { cursor:pointer; color:var(--bad); }
`;

export const DASHBOARD_JS = `
document.addEventListener('submit', function (event) {
  var message = event.target.getAttribute('data-confirm');
  if (message && !window.confirm(message)) event.preventDefault();
});
`;
