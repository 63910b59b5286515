// Shared helpers of the duraloop view pages: the token, the API, and DOM building that only
// ever sets text (every string from the API is untrusted: model and tool output).

const TOKEN_KEY = "duraloop-view-token";

/** The server's token: from ?token= (kept in sessionStorage), else the stored one. */
export function token() {
  const fromUrl = new URLSearchParams(location.search).get("token");
  if (fromUrl) {
    sessionStorage.setItem(TOKEN_KEY, fromUrl);
    return fromUrl;
  }
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

/** The page link of one session: a fixed path, the id encoded, the token kept. */
export function sessionHref(id) {
  return "/s/" + encodeURIComponent(String(id)) + "?token=" + encodeURIComponent(token());
}

/** The sessions page link, the token kept. */
export function indexHref() {
  return "/?token=" + encodeURIComponent(token());
}

/** An API error: the status and the server's one-line message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function answer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = body && typeof body.error === "string" ? body.error : response.statusText;
    throw new ApiError(response.status, `${response.status}: ${message}`);
  }
  return body;
}

/** GET an /api path (the token in the header); the parsed JSON, or throws ApiError. */
export async function apiGet(path) {
  const response = await fetch(path, {
    headers: { "X-Duraloop-Token": token() },
    credentials: "same-origin",
  });
  return answer(response);
}

/** POST JSON to an /api path, same-origin, the token in the header. */
export async function apiPost(path, body) {
  const response = await fetch(path, {
    method: "POST",
    mode: "same-origin",
    credentials: "same-origin",
    headers: { "X-Duraloop-Token": token(), "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return answer(response);
}

/**
 * Build an element. `props`: `id`, `class`, `text`, `title`, `dataset` (object), `attrs` (only
 * data-only attributes: never event handlers, never href/src with data), `on` (events).
 * Children: nodes or strings (strings become text nodes).
 */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  if (props.id) node.id = String(props.id);
  if (props.class) node.className = props.class;
  if (props.text !== undefined && props.text !== null) node.textContent = String(props.text);
  if (props.title) node.title = String(props.title);
  if (props.dataset) {
    for (const [key, value] of Object.entries(props.dataset)) node.dataset[key] = String(value);
  }
  if (props.attrs) {
    for (const [key, value] of Object.entries(props.attrs)) {
      if (/^on/i.test(key) || key === "href" || key === "src" || key === "style") {
        throw new Error(`el(): attribute ${key} is not data-only`);
      }
      node.setAttribute(key, String(value));
    }
  }
  if (props.on) {
    for (const [name, handler] of Object.entries(props.on)) node.addEventListener(name, handler);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/** A link to a session page (the only kind of data-derived link the pages build). */
export function sessionLink(id, text) {
  const link = el("a", { class: "session-link", text: text ?? id, dataset: { session: id } });
  link.href = sessionHref(id);
  return link;
}

/** Remove every child of a node. */
export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

/** A millisecond timestamp as local date and time, or "—". */
export function fmtTime(ms) {
  if (typeof ms !== "number") return "—";
  const date = new Date(ms);
  const pad = (n) => String(n).padStart(2, "0");
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`
  );
}

/** A duration in milliseconds, short. */
export function fmtDuration(ms) {
  if (typeof ms !== "number" || !isFinite(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

/** A byte count, short. */
export function fmtBytes(bytes) {
  if (typeof bytes !== "number") return "—";
  const units = ["B", "KB", "MB", "GB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** A whole number with thousands separators. */
export function fmtInt(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "—";
}

/** Show an error message in the page's error bar. */
export function showError(message) {
  const bar = document.getElementById("error");
  if (!bar) return;
  bar.hidden = false;
  bar.textContent = String(message);
}
