// The sessions page: every session of the store, filtered by state and searched by id and
// title on the client, the list polled every 5 s (a new session appears without a reload; the
// filter and search stay, and an unchanged list is not re-rendered). Every string is
// rendered as text.
import {
  apiGet,
  clear,
  el,
  fmtBytes,
  fmtInt,
  fmtTime,
  indexHref,
  sessionLink,
  showError,
  token,
} from "./common.js";

const POLL_MS = 5000;
let allRows = [];
let lastAnswer = null; // the JSON text of the rows shown, to skip unchanged polls

function stateCell(row) {
  const cell = el("td", { class: "state" });
  cell.append(el("span", { class: `badge state-${row.state}`, text: row.state }));
  if (row.state === "damaged" && row.damaged) {
    cell.append(el("div", { class: "damaged-reason", text: row.damaged }));
  }
  return cell;
}

function rowNode(row) {
  const idCell = el("td", { class: "id" }, sessionLink(row.id));
  if (row.title) idCell.append(el("div", { class: "title", text: row.title }));
  if (row.parent) {
    idCell.append(el("div", { class: "parent muted" }, "fork of ", sessionLink(row.parent)));
  }
  return el(
    "tr",
    { class: `row row-${row.state}`, dataset: { id: row.id, state: row.state } },
    idCell,
    el("td", { text: fmtTime(row.created) }),
    el("td", { text: fmtTime(row.updated) }),
    el("td", { class: "num", text: fmtInt(row.turns) }),
    el("td", { class: "num", text: fmtInt(row.events) }),
    el("td", { class: "reason", text: row.last_reason ?? "—" }),
    stateCell(row),
    el("td", { class: "num", text: fmtBytes(row.size_bytes) }),
  );
}

function matches(row, state, query) {
  if (state && row.state !== state) return false;
  if (!query) return true;
  const haystack = `${row.id} ${row.title ?? ""}`.toLowerCase();
  return haystack.includes(query);
}

function render() {
  const state = document.getElementById("state-filter").value;
  const query = document.getElementById("search").value.trim().toLowerCase();
  const body = document.getElementById("rows");
  const shown = allRows.filter((row) => matches(row, state, query));
  clear(body);
  const fragment = document.createDocumentFragment();
  for (const row of shown) fragment.append(rowNode(row));
  if (shown.length === 0) {
    const text = allRows.length === 0 ? "no sessions in this store" : "no session matches";
    fragment.append(el("tr", {}, el("td", { class: "muted", attrs: { colspan: 8 }, text })));
  }
  body.append(fragment);
  document.getElementById("count").textContent = `${shown.length} of ${allRows.length}`;
}

async function refresh() {
  const answer = await apiGet("/api/sessions");
  const rows = Array.isArray(answer.sessions) ? answer.sessions : [];
  const text = JSON.stringify(rows);
  if (text === lastAnswer) return;
  lastAnswer = text;
  allRows = rows;
  render();
}

function poll() {
  setTimeout(async () => {
    if (!document.hidden) {
      try {
        await refresh();
        document.getElementById("error").hidden = true;
      } catch (error) {
        showError(`Could not list the sessions (retrying every 5 s): ${error.message}`);
      }
    }
    poll();
  }, POLL_MS);
}

async function main() {
  token();
  document.getElementById("home").href = indexHref();
  document.getElementById("state-filter").addEventListener("change", render);
  document.getElementById("search").addEventListener("input", render);
  try {
    await refresh();
  } catch (error) {
    showError(`Could not list the sessions: ${error.message}`);
    allRows = [];
  }
  render();
  document.body.dataset.ready = "1";
  poll();
}

main();
