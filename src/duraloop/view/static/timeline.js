// The timeline of one session: per turn, per step a lane with the model request (retries
// marked) and one lane per tool call, every bar placed on the turn's shared time axis, so
// parallel calls overlap visibly. Recovery results are marked and explained; the failure a
// turn/end records is shown at its step. Every string is rendered as text.
import { clear, el, fmtDuration, fmtInt } from "./common.js";

const TURNS_PER_PAGE = 100;
const OPEN_BY_DEFAULT = 20;

function place(bar, t0, span, start, end) {
  const left = Math.max(0, Math.min(100, ((start - t0) / span) * 100));
  const right = Math.max(left, Math.min(100, ((end - t0) / span) * 100));
  bar.style.left = `${left}%`;
  bar.style.width = `${Math.max(right - left, 0)}%`;
  return bar;
}

function plural(n, one, many) {
  return `${n} ${String(n) === "1" ? one : many}`;
}

function latest(turn) {
  let t = turn.end ?? turn.start;
  for (const step of turn.steps ?? []) {
    for (const value of [step.start, step.end, step.request?.start, step.request?.end]) {
      if (typeof value === "number") t = Math.max(t, value);
    }
    for (const call of step.calls ?? []) {
      for (const value of [call.start, call.end]) {
        if (typeof value === "number") t = Math.max(t, value);
      }
    }
  }
  if (turn.paused) {
    // A paused turn waits for a person: its time stops at its last event (the ask).
    if (typeof turn.last === "number") t = Math.max(t, turn.last);
  } else if (turn.end === null || turn.end === undefined) {
    t = Math.max(t, Date.now());
  }
  return t;
}

function usageText(usage) {
  if (!usage) return "";
  const parts = [
    `in ${fmtInt(usage.input_tokens)} · out ${fmtInt(usage.output_tokens)} tokens`,
    plural(fmtInt(usage.requests), "request", "requests"),
    plural(fmtInt(usage.tool_calls), "tool call", "tool calls"),
  ];
  if (typeof usage.cost === "number") parts.push(`cost ${usage.cost.toFixed(4)}`);
  return parts.join(" · ");
}

function hasTrouble(turn) {
  if (turn.error) return true;
  return (turn.steps ?? []).some((step) =>
    (step.calls ?? []).some((call) => call.recovery || call.aborted || call.is_error));
}

function callClasses(call) {
  const classes = ["bar", "call"];
  if (call.is_error) classes.push("is-error");
  if (call.recovery === "TOOL_OUTCOME_UNKNOWN") classes.push("recovery", "recovery-unknown");
  if (call.recovery === "TOOL_NOT_STARTED") classes.push("recovery", "recovery-not-started");
  if (call.aborted) classes.push("aborted");
  if (call.rerun_of !== null && call.rerun_of !== undefined) classes.push("rerun");
  if (call.waiting) classes.push("waiting");
  else if (call.end === null || call.end === undefined) classes.push("running");
  return classes.join(" ");
}

function waitingText(call) {
  return call.waiting === "resume" ? "decided: waits for a resume" : "waiting for approval";
}

function waitingCalls(turn) {
  return (turn.steps ?? []).flatMap((step) => (step.calls ?? []).filter((call) => call.waiting));
}

function lane(label, track, extraClass = "") {
  return el("div", { class: `lane ${extraClass}` }, label, track);
}

export class Timeline {
  constructor(container, onRaw) {
    this.container = container;
    this.onRaw = onRaw;
    this.userOpen = new Map();
    this.shownTurns = TURNS_PER_PAGE;
    this.turns = [];
  }

  _clickable(node, seq) {
    if (typeof seq !== "number") return node;
    node.dataset.seq = String(seq);
    node.classList.add("clickable");
    node.addEventListener("click", (event) => {
      event.stopPropagation();
      this.onRaw(seq);
    });
    return node;
  }

  _requestLane(step, t0, span, t1) {
    const request = step.request ?? {};
    const start = request.start ?? step.start;
    const firstCall = Math.min(...(step.calls ?? []).map((c) => c.start ?? Infinity));
    const end = request.end ?? (isFinite(firstCall) ? firstCall : step.end ?? t1);
    const retries = request.retries ?? [];
    const model = [request.provider, request.model].filter(Boolean).join("/");
    const bar = el("div", {
      class: `bar request${retries.length ? " has-retries" : ""}`,
      title: `model request ${model} · ${fmtDuration(end - start)}` +
        (request.finish ? ` · finish ${request.finish}` : "") +
        (retries.length ? ` · ${plural(retries.length, "retry", "retries")}` : ""),
    });
    place(bar, t0, span, start, end);
    this._clickable(bar, request.message_seq ?? step.start_seq);
    const track = el("div", { class: "track" }, bar);
    for (const retry of retries) {
      const tick = el("div", {
        class: "tick retry",
        title: `retry attempt ${retry.attempt} · ${retry.code ?? ""} · wait ${retry.delay_ms ?? 0} ms`,
      });
      place(tick, t0, span, retry.time, retry.time);
      track.append(this._clickable(tick, retry.seq));
    }
    const label = el("div", { class: "lane-label" },
      el("span", { text: `step ${step.step} · model` }),
      retries.length ? el("span", { class: "badge retry-badge", text: plural(retries.length, "retry", "retries") }) : null);
    return lane(label, track, "lane-request");
  }

  _callLane(call, step, t0, span, t1) {
    const end = call.end ?? t1;
    const start = call.start ?? (call.waiting ? call.asked : null) ?? call.end ?? step.end ?? end;
    const bar = el("div", {
      class: callClasses(call),
      title: `${call.name} ${call.call_id} · ` +
        (call.waiting ? waitingText(call) : fmtDuration(end - start)) +
        (call.code ? ` · ${call.code}` : ""),
      dataset: { callId: call.call_id ?? "", name: call.name ?? "" },
    });
    place(bar, t0, span, start, end);
    if (call.waiting) bar.style.left = `min(${bar.style.left}, calc(100% - 12px))`;
    this._clickable(bar, call.result_seq ?? call.call_seq);
    const label = el("div", { class: "lane-label" }, el("span", { class: "tool-name", text: call.name ?? "?" }));
    if (call.code) label.append(el("span", { class: "badge code", text: call.code }));
    if (call.waiting) {
      label.append(el("span", { class: `badge waiting-badge waiting-${call.waiting === "resume" ? "resume" : "approval"}`, text: waitingText(call) }));
    }
    if (call.rerun_of !== null && call.rerun_of !== undefined) {
      label.append(el("span", { class: "badge rerun-badge", text: "re-run" }));
    }
    return lane(label, el("div", { class: "track" }, bar), "lane-call");
  }

  _stepNode(turn, step, t0, span, t1, failure) {
    const node = el("div", { class: "step", dataset: { step: step.step } });
    node.append(this._requestLane(step, t0, span, t1));
    for (const call of step.calls ?? []) node.append(this._callLane(call, step, t0, span, t1));
    const explained = (step.calls ?? []).filter((call) => call.explanation);
    for (const call of explained) {
      const kind = call.recovery ? "recovery" : call.aborted ? "aborted" : "error";
      node.append(this._clickable(el("div", { class: `explanation explanation-${kind}` },
        el("span", { class: "badge code", text: call.code ?? kind }),
        el("span", { class: "tool-name", text: ` ${call.name} ` }),
        el("span", { class: "muted", text: `${call.call_id}: ` }),
        el("span", { class: "explanation-text", text: call.explanation })), call.result_seq ?? call.call_seq));
    }
    if (failure) node.append(failure);
    return node;
  }

  _failureNode(turn, stepNumber) {
    const error = turn.error;
    const where = stepNumber === null ? "" : ` at step ${stepNumber}`;
    const head = [error.name, error.code].filter(Boolean).join(" ");
    return this._clickable(el("div", { class: "failure" },
      el("strong", { text: `Turn ${turn.turn} failed${where}: ` }),
      el("span", { text: `${head ? head + ": " : ""}${error.message ?? ""}` })),
      turn.end_seq_of_error ?? turn.end_seq);
  }

  _failureStep(turn) {
    const steps = turn.steps ?? [];
    if (steps.length === 0) return null;
    const at = turn.end_seq_of_error;
    if (typeof at !== "number") return steps[steps.length - 1].step;
    let found = steps[0].step;
    for (const step of steps) if (step.start_seq <= at) found = step.step;
    return found;
  }

  _turnBody(turn) {
    const t0 = turn.start;
    const t1 = latest(turn);
    const span = Math.max(t1 - t0, 1);
    const body = el("div", { class: "turn-body" });
    body.append(el("div", { class: "axis" },
      el("div", { class: "lane-label muted", text: "time" }),
      el("div", { class: "axis-track" },
        el("span", { class: "axis-start", text: "0" }),
        el("span", { class: "axis-end", text: fmtDuration(span) }))));
    const failureStep = turn.error ? this._failureStep(turn) : null;
    for (const step of turn.steps ?? []) {
      const failure = turn.error && step.step === failureStep ? this._failureNode(turn, step.step) : null;
      body.append(this._stepNode(turn, step, t0, span, t1, failure));
    }
    if (turn.error && failureStep === null) body.append(this._failureNode(turn, null));
    return body;
  }

  _turnNode(turn, open) {
    const reason = turn.reason ?? (turn.paused ? "paused" : turn.end === null ? "running" : "ended");
    const duration = fmtDuration(latest(turn) - turn.start);
    const waiting = waitingCalls(turn);
    const waitingNote = waiting.length ? ` · ${plural(waiting.length, "call", "calls")} ${waitingText(waiting[0])}` : "";
    const summary = el("summary", { class: "turn-head" },
      el("span", { class: "turn-title", text: `Turn ${turn.turn}` }),
      el("span", { class: `badge reason reason-${String(reason).split(" ")[0].replace(/[^a-z-]/g, "")}`, text: reason }),
      el("span", { class: "muted", text: ` ${duration} · ${usageText(turn.usage)}${waitingNote}` }),
      el("button", {
        class: "raw-button",
        attrs: { type: "button" },
        title: "the turn/start event",
        text: "raw",
        on: { click: (event) => { event.preventDefault(); this.onRaw(turn.start_seq); } },
      }));
    const details = el("details", { class: `turn${turn.error ? " has-error" : ""}`, dataset: { turn: turn.turn } }, summary);
    let built = false;
    const build = () => {
      if (built) return;
      built = true;
      details.append(this._turnBody(turn));
    };
    details.addEventListener("toggle", () => {
      this.userOpen.set(turn.turn, details.open);
      if (details.open) build();
    });
    if (open) {
      details.open = true;
      build();
    }
    return details;
  }

  /** Render (or re-render) the turns of a summary. */
  render(turns) {
    this.turns = turns ?? [];
    clear(this.container);
    if (this.turns.length === 0) {
      this.container.append(el("p", { class: "muted", text: "no turns yet" }));
      return;
    }
    const shown = this.turns.slice(0, this.shownTurns);
    let opened = 0;
    const fragment = document.createDocumentFragment();
    shown.forEach((turn, index) => {
      let open = this.userOpen.get(turn.turn);
      if (open === undefined) {
        const last = index === this.turns.length - 1;
        const few = this.turns.length <= 5;
        open = (few || last || hasTrouble(turn)) && opened < OPEN_BY_DEFAULT;
      }
      if (open) opened += 1;
      fragment.append(this._turnNode(turn, open));
    });
    this.container.append(fragment);
    if (this.turns.length > shown.length) {
      this.container.append(el("button", {
        class: "more-turns",
        attrs: { type: "button" },
        text: `Show more turns (${this.turns.length - shown.length} more)`,
        on: { click: () => { this.shownTurns += TURNS_PER_PAGE; this.render(this.turns); } },
      }));
    }
  }
}
