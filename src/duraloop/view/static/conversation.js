// The conversation of one session: paged from /api/sessions/{id}/messages (the first page,
// then more on scroll or "Load more"), appended to live. Every string is rendered as text.
import { apiGet, el, fmtTime } from "./common.js";

const PAGE = 200;
const PREVIEW_LINES = 40;
const PREVIEW_CHARS = 4000;

/** The first PREVIEW_LINES lines / PREVIEW_CHARS characters of `text` (all of it if short). */
function preview(text) {
  let end = Math.min(text.length, PREVIEW_CHARS);
  let lines = 0;
  for (let i = 0; i < end; i += 1) {
    if (text[i] === "\n") {
      lines += 1;
      if (lines === PREVIEW_LINES) { end = i; break; }
    }
  }
  return text.slice(0, end);
}

/** A <pre> of a long text: its start, and a button showing all of it (text only). */
function longPre(cls, value) {
  const text = String(value ?? "");
  const start = preview(text);
  const pre = el("pre", { class: cls, text: start });
  if (start.length === text.length) return pre;
  const more = text.length - start.length;
  const shortLabel = `show all (${more.toLocaleString("en-US")} more characters)`;
  let open = false;
  const button = el("button", {
    class: "show-all",
    attrs: { type: "button" },
    text: shortLabel,
    on: {
      click: (event) => {
        event.stopPropagation(); // the item's click opens its raw event
        open = !open;
        pre.textContent = open ? text : start;
        button.textContent = open ? "show less" : shortLabel;
      },
    },
  });
  return el("div", { class: "long-text" }, pre, button);
}

function textBlock(text, cls = "text") {
  return el("div", { class: cls, text: text ?? "" });
}

function errorLine(error) {
  if (!error) return null;
  const parts = [error.name, error.code].filter(Boolean).join(" ");
  return el("div", { class: "error-text", text: `${parts ? parts + ": " : ""}${error.message ?? ""}` });
}

function toolCallNode(call) {
  return el(
    "div",
    { class: "tool-call", dataset: { callId: call.call_id ?? "" } },
    el("div", { class: "tool-call-head" },
      el("span", { class: "tool-name", text: call.name ?? "?" }),
      el("span", { class: "muted call-id", text: ` ${call.call_id ?? ""}` })),
    longPre("arguments", call.arguments),
  );
}

function itemBody(item) {
  switch (item.kind) {
    case "turn_start":
      return [el("span", { class: "divider-text", text: `Turn ${item.turn} started` })];
    case "turn_end": {
      const reason = item.reason ?? "ended";
      return [
        el("span", { class: "divider-text", text: `Turn ${item.turn} ended: ${reason}` }),
        errorLine(item.error),
      ];
    }
    case "step_failed":
      return [
        el("div", { class: "role", text: `Step ${item.step ?? "?"} failed` }),
        item.text ? textBlock(item.text) : null,
        errorLine(item.error),
      ];
    case "user":
      return [el("div", { class: "role", text: "User" }), textBlock(item.text)];
    case "assistant": {
      const nodes = [el("div", { class: "role", text: "Assistant" })];
      if (item.reasoning) {
        nodes.push(
          el("details", { class: "reasoning" },
            el("summary", { text: "Reasoning" }),
            textBlock(item.reasoning, "reasoning-text")),
        );
      }
      if (item.text) nodes.push(textBlock(item.text));
      for (const call of item.tool_calls ?? []) nodes.push(toolCallNode(call));
      return nodes;
    }
    case "tool_result": {
      const head = el("div", { class: "role" }, `Tool result `,
        el("span", { class: "muted call-id", text: item.call_id ?? "" }));
      if (item.code) head.append(el("span", { class: "badge code", text: item.code }));
      return [head, longPre("result-text", item.text)];
    }
    default:
      return [el("div", { class: "role", text: String(item.kind) }), textBlock(item.text)];
  }
}

function itemNode(item, onRaw) {
  const kind = String(item.kind ?? "unknown").replace(/[^a-z_]/g, "");
  const classes = ["item", `item-${kind}`];
  if (item.is_error) classes.push("is-error");
  if (item.kind === "turn_start" || item.kind === "turn_end") classes.push("divider");
  const node = el(
    "article",
    {
      class: classes.join(" "),
      title: `seq ${item.seq} · ${fmtTime(item.time)} · click for the raw event`,
      dataset: { seq: item.seq, kind, turn: item.turn ?? "" },
    },
    ...itemBody(item),
  );
  node.addEventListener("click", (event) => {
    if (event.target.closest("summary")) return;
    onRaw(item.seq);
  });
  return node;
}

export class Conversation {
  constructor(container, sessionId, onRaw) {
    this.container = container;
    this.sessionId = sessionId;
    this.onRaw = onRaw;
    this.after = -1;
    this.atEnd = false;
    this.seen = new Set();
    this.chain = Promise.resolve();
    this.button = document.getElementById("load-more");
    this.status = document.getElementById("conversation-status");
    this.button.addEventListener("click", () => this.loadMore());
    const sentinel = document.getElementById("sentinel");
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting) && !this.atEnd) this.loadMore();
    }, { rootMargin: "600px" });
    this.observer.observe(sentinel);
  }

  /** The number of items shown. */
  get count() {
    return this.seen.size;
  }

  _queue(work) {
    this.chain = this.chain.then(work).catch((error) => {
      this.status.textContent = `could not load the conversation: ${error.message}`;
    });
    return this.chain;
  }

  async _page() {
    const path = `/api/sessions/${encodeURIComponent(this.sessionId)}/messages`;
    const answer = await apiGet(`${path}?after=${this.after}&limit=${PAGE}`);
    const fragment = document.createDocumentFragment();
    let last = this.after;
    for (const item of answer.items ?? []) {
      if (typeof item.seq === "number") last = Math.max(last, item.seq);
      if (this.seen.has(item.seq)) continue;
      this.seen.add(item.seq);
      fragment.append(itemNode(item, this.onRaw));
    }
    this.container.append(fragment);
    if (answer.next === null || answer.next === undefined) {
      this.atEnd = true;
      this.after = last;
    } else {
      this.atEnd = false;
      this.after = answer.next;
    }
    this._showState();
    return answer.next ?? null;
  }

  _showState() {
    this.button.hidden = this.atEnd;
    this.status.textContent = this.atEnd
      ? `${this.count} items`
      : `${this.count} items shown, more to load`;
  }

  /** Load the next page (the first one on the first call). */
  loadMore() {
    if (this.loading) return this.chain;
    this.loading = true;
    return this._queue(async () => {
      try {
        await this._page();
      } finally {
        this.loading = false;
      }
    });
  }

  /** Live: new events were committed; append the new items when the end is shown. */
  refreshTail() {
    if (this.tailQueued) return this.chain;
    this.tailQueued = true;
    return this._queue(async () => {
      this.tailQueued = false;
      if (!this.atEnd) return;
      let next = await this._page();
      let pages = 0;
      while (next !== null && pages < 5) {
        next = await this._page();
        pages += 1;
      }
    });
  }
}
