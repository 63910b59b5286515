// The session page: the header, pending approvals (Approve / Deny with feedback), the
// timeline, the conversation, the raw event of anything clicked, and live updates over
// server-sent events (EventSource resends Last-Event-ID on reconnect, so nothing is missed).
// Every string from the API is rendered as text.
import {
  apiGet,
  apiPost,
  clear,
  el,
  fmtInt,
  fmtTime,
  indexHref,
  sessionLink,
  showError,
  token,
} from "./common.js";
import { Conversation } from "./conversation.js";
import { Timeline } from "./timeline.js";

const BOUNDARIES = new Set([
  "turn/start", "turn/end", "step/start", "step/end", "tool/call", "tool/result",
  "approval/asked", "approval/decided", "llm/retry", "assistant/message", "user/message",
]);
const CONVERSATION_EVENTS = new Set([
  "turn/start", "turn/end", "step/end", "user/message", "assistant/message", "tool/result",
]);

const sessionId = decodeURIComponent(location.pathname.replace(/^\/s\//, ""));
const base = `/api/sessions/${encodeURIComponent(sessionId)}`;
const state = { lastSeq: -1, summary: null, source: null, received: 0, gaps: 0, repeats: 0 };

// ---- raw event panel ---------------------------------------------------------------------

async function showRaw(seq) {
  const panel = document.getElementById("raw-panel");
  const pre = document.getElementById("raw-json");
  panel.hidden = false;
  document.getElementById("raw-seq").textContent = `seq ${seq}`;
  pre.textContent = "loading…";
  try {
    const answer = await apiGet(`${base}/events?after=${Number(seq) - 1}&limit=1`);
    const event = (answer.events ?? [])[0];
    pre.textContent = event === undefined ? "no such event" : JSON.stringify(event, null, 2);
  } catch (error) {
    pre.textContent = `could not load the event: ${error.message}`;
  }
}

// ---- header ------------------------------------------------------------------------------

function field(name, ...value) {
  return el("div", { class: "field" }, el("span", { class: "field-name", text: name }),
    el("span", { class: "field-value" }, ...value));
}

function renderHeader(summary) {
  const header = document.getElementById("header");
  clear(header);
  const info = summary.header ?? {};
  header.append(el("h1", {}, el("span", { class: "muted", text: "session " }),
    el("span", { id: "session-id", text: summary.id })));
  const badge = el("span", { class: `badge state-${summary.state}`, id: "session-state", text: summary.state });
  const grid = el("div", { class: "fields" },
    field("state", badge),
    field("cwd", info.cwd ?? "—"),
    field("created", fmtTime(info.created ?? info.createdAt)),
    field("events", el("span", { id: "event-count", text: fmtInt(summary.events) })),
    field("turns", fmtInt((summary.turns ?? []).length)));
  if (info.parent) grid.append(field("parent", sessionLink(info.parent)));
  const children = summary.children ?? [];
  if (children.length) {
    const list = el("span", { class: "children" });
    children.forEach((child, index) => {
      if (index) list.append(", ");
      list.append(sessionLink(child));
    });
    grid.append(field("forks", list));
  }
  header.append(grid);
  if (summary.damaged) header.append(el("div", { class: "damaged-reason", text: `damaged: ${summary.damaged}` }));
  document.title = `duraloop view — ${summary.id}`;
}

// ---- approvals ---------------------------------------------------------------------------

// What happens after a decision, kept on the page (the ask itself goes once it is decided).
function showDecisionNotice(allow, callId, continuation) {
  const notice = document.getElementById("decision-notice");
  clear(notice);
  const what = `${allow ? "Approved" : "Denied"}: recorded (call ${callId}). `;
  const next = continuation === "queued"
    ? [el("span", { text: "The turn's continuation is queued for the workers: it goes on when a worker takes it." })]
    : [el("span", { text: "The turn goes on when it is resumed: " }),
      el("code", { class: "resume-command", text: `duraloop resume ${sessionId}` }),
      el("span", { text: " (with the model it needs)." })];
  const close = el("button", {
    class: "notice-close",
    attrs: { type: "button" },
    title: "dismiss",
    text: "×",
    on: { click: () => { notice.hidden = true; } },
  });
  notice.append(el("strong", { text: what }), ...next, close);
  notice.dataset.continuation = continuation === "queued" ? "queued" : "resume";
  notice.hidden = false;
}

function askNode(ask) {
  const feedback = el("textarea", {
    class: "feedback",
    attrs: { rows: 2, maxlength: 4000, placeholder: "feedback for the model (optional, sent with Deny)" },
  });
  const status = el("span", { class: "ask-status muted" });
  const buttons = [];
  const decide = async (allow) => {
    buttons.forEach((b) => { b.disabled = true; });
    status.textContent = "recording…";
    const text = feedback.value.trim();
    try {
      const answer = await apiPost(`${base}/approvals/${encodeURIComponent(ask.call_id)}`,
        { allow, feedback: text ? text : null });
      status.textContent = allow ? "approved: decision recorded" : "denied: decision recorded";
      showDecisionNotice(allow, ask.call_id, answer?.continuation);
      node.classList.add("decided");
      scheduleSummary();
    } catch (error) {
      status.textContent = `not recorded: ${error.message}`;
      buttons.forEach((b) => { b.disabled = false; });
    }
  };
  const approve = el("button", { class: "approve", attrs: { type: "button" }, text: "Approve", on: { click: () => decide(true) } });
  const deny = el("button", { class: "deny", attrs: { type: "button" }, text: "Deny", on: { click: () => decide(false) } });
  buttons.push(approve, deny);
  const node = el("div", { class: "ask", dataset: { callId: ask.call_id } },
    el("div", { class: "ask-head" },
      el("span", { class: "tool-name", text: ask.tool ?? "?" }),
      el("span", { class: "muted call-id", text: ` ${ask.call_id}` })),
    ask.reason ? el("div", { class: "ask-reason", text: ask.reason }) : null,
    el("pre", { class: "arguments", text: ask.arguments ?? "" }),
    feedback,
    el("div", { class: "ask-buttons" }, approve, deny, status));
  return node;
}

function renderApprovals(summary) {
  const section = document.getElementById("approvals");
  const asks = document.getElementById("asks");
  const pending = summary.pending ?? [];
  const kept = new Map();
  for (const node of asks.querySelectorAll(".ask")) kept.set(node.dataset.callId, node);
  clear(asks);
  for (const ask of pending) asks.append(kept.get(ask.call_id) ?? askNode(ask));
  section.hidden = pending.length === 0;
}

// ---- summary and live --------------------------------------------------------------------

const timeline = new Timeline(document.getElementById("timeline"), showRaw);
const conversation = new Conversation(document.getElementById("conversation"), sessionId, showRaw);

async function loadSummary() {
  const summary = await apiGet(base);
  state.summary = summary;
  renderHeader(summary);
  renderApprovals(summary);
  timeline.render(summary.turns ?? []);
  return summary;
}

let summaryTimer = null;
let summaryRunning = null;
function scheduleSummary() {
  if (summaryTimer !== null) return;
  summaryTimer = setTimeout(async () => {
    summaryTimer = null;
    if (summaryRunning) await summaryRunning;
    summaryRunning = loadSummary().catch((error) => showError(`summary: ${error.message}`));
    await summaryRunning;
    summaryRunning = null;
  }, 150);
}

let tailTimer = null;
function scheduleTail() {
  if (tailTimer !== null) return;
  tailTimer = setTimeout(() => {
    tailTimer = null;
    conversation.refreshTail();
  }, 100);
}

function setLive(mode, text) {
  const live = document.getElementById("live");
  live.className = `live ${mode}`;
  live.textContent = text;
}

function onEvent(message) {
  let event;
  try {
    event = JSON.parse(message.data);
  } catch {
    return;
  }
  const seq = Number(message.lastEventId !== "" ? message.lastEventId : event.seq);
  if (!Number.isFinite(seq)) return;
  if (seq <= state.lastSeq) {
    state.repeats += 1; // never applied twice (a server would have to resend it)
    document.body.dataset.repeats = String(state.repeats);
    return;
  }
  if (seq !== state.lastSeq + 1) {
    state.gaps += 1; // seqs are contiguous: a jump means an event was missed
    document.body.dataset.gaps = String(state.gaps);
  }
  state.lastSeq = seq;
  state.received += 1;
  document.body.dataset.lastSeq = String(seq);
  const count = document.getElementById("event-count");
  if (count) count.textContent = fmtInt(seq + 1);
  if (BOUNDARIES.has(event.type)) scheduleSummary();
  if (CONVERSATION_EVENTS.has(event.type)) scheduleTail();
}

function connect() {
  const url = `${base}/stream?token=${encodeURIComponent(token())}&after=${state.lastSeq}`;
  const source = new EventSource(url);
  state.source = source;
  source.addEventListener("open", () => {
    setLive("on", "live");
    document.getElementById("error").hidden = true;
  });
  source.addEventListener("event", onEvent);
  source.addEventListener("error", (event) => {
    if (typeof event.data === "string") {
      // The server's `event: error` (the log became unreadable): say why.
      try {
        showError(`live updates stopped: ${JSON.parse(event.data).error}`);
      } catch {
        showError("live updates stopped");
      }
    }
    if (source.readyState === EventSource.CLOSED) {
      // A fatal answer (not 200): EventSource gives up; reconnect ourselves from lastSeq.
      setLive("off", "reconnecting…");
      setTimeout(() => { if (state.source === source) connect(); }, 2000);
    } else {
      setLive("off", "reconnecting…");
    }
  });
}

async function main() {
  token();
  document.getElementById("home").href = indexHref();
  document.getElementById("raw-close").addEventListener("click", () => {
    document.getElementById("raw-panel").hidden = true;
  });
  let summary;
  try {
    summary = await loadSummary();
  } catch (error) {
    showError(`Could not load session ${sessionId}: ${error.message}`);
    return;
  }
  state.lastSeq = (summary.events ?? 0) - 1;
  document.body.dataset.lastSeq = String(state.lastSeq);
  document.body.dataset.gaps = "0";
  document.body.dataset.repeats = "0";
  await conversation.loadMore();
  if (summary.state === "damaged") {
    setLive("off", "not live: the log is damaged");
  } else {
    connect();
  }
  document.body.dataset.ready = "1";
}

main();
