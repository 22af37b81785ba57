// Candidates the agents proposed (#/candidates?status=…): accept, edit and accept, or reject
// (pending ones); browse others. An update or replacement shows the current value it would replace.

import { ApiError } from "./api.js";
import { field, h, mount, select } from "./dom.js";
import { joined, t, tn, when } from "./i18n.js";
import { CATEGORIES, keyText, memoryLink, options, scopeFields, scopeText } from "./parts.js";

const STATUSES = ["pending", "accepted", "rejected", "expired"];

function listState(ctx) {
  const status = ctx.route.query.status || "pending";
  if (ctx.lists.candidates?.status !== status) {
    ctx.lists.candidates = { status, items: [], targets: {}, editing: null, loaded: false };
  }
  return ctx.lists.candidates;
}

/** The candidates, and the current state of every memory a pending one would change. */
async function load(ctx, state) {
  state.items = (await ctx.api.candidates(state.status)).data.items;
  const ids = [...new Set(state.items.filter((c) => c.target_memory_id && c.status === "pending")
    .map((c) => c.target_memory_id))];
  const targets = await Promise.all(ids.map((id) => target(ctx, id)));
  state.targets = Object.fromEntries(ids.map((id, i) => [id, targets[i]]));
  state.loaded = true;
  state.stale = false;
}

/** {memory} or {gone: "forgotten"|"missing"} for a target memory. */
async function target(ctx, memoryId) {
  try {
    return { memory: (await ctx.api.getMemory(memoryId)).data };
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 410)) {
      return { gone: error.status === 410 ? "forgotten" : "missing" };
    }
    throw error;
  }
}

export async function renderCandidates(ctx, main) {
  const state = listState(ctx);
  // Fresh on every visit (a decision elsewhere, a forget); a redraw (an edit opened) keeps them.
  if (!state.loaded || state.stale || !ctx.redrawing) {
    try {
      await load(ctx, state);
    } catch (error) {
      ctx.fail(error);
    }
  }
  ctx.refresher = async () => {
    if (state.editing) return;
    const before = JSON.stringify([state.items, state.targets]);
    try {
      await load(ctx, state);
    } catch {
      return;
    }
    if (JSON.stringify([state.items, state.targets]) !== before) await ctx.redraw();
  };
  const status = select(options("candidate_status", STATUSES), state.status, { name: "status" });
  const filter = h(
    "form",
    {
      class: "filters card row",
      "aria-label": t("candidates.filter"),
      onSubmit: async (event) => {
        event.preventDefault();
        await ctx.go("candidates", { query: { status: status.value }, focus: "show-candidates" });
        ctx.announce(tn("candidates.count", ctx.lists.candidates.items.length));
      },
    },
    field(t("candidates.status"), status),
    h("button", { type: "submit", "data-focus-key": "show-candidates" }, t("candidates.show")),
  );
  mount(main,
    h("h2", {}, t("candidates.heading")),
    h("p", { class: "hint" }, t("candidates.intro")),
    filter,
    h("p", { class: "count", id: "candidate-count" }, tn("candidates.count", state.items.length)),
    state.items.length
      ? h("ul", { class: "candidates" }, state.items.map((c, i) => card(ctx, state, c, i)))
      : h("p", { class: "empty", id: "candidates-empty" }, t(`candidates.empty.${state.status}`)),
  );
}

function card(ctx, state, c, index) {
  const pending = c.status === "pending";
  const headingId = `cand-${c.candidate_id}`;
  const editing = state.editing === c.candidate_id;
  return h(
    "li",
    { class: "card candidate", "aria-labelledby": headingId, "data-candidate": c.candidate_id },
    h(
      "h3",
      { id: headingId, tabindex: "-1", "data-focus-key": headingId },
      h("span", { class: "key" }, keyText(c.proposed_key)),
      " ",
      h("span", { class: `badge op-${c.operation}` }, t(`operation.${c.operation}`)),
    ),
    proposal(state, c),
    h(
      "p",
      { class: "hint" },
      joined([
        scopeText(c.proposed_scope_type, c.proposed_workspace_type),
        t("candidates.proposed_at", { when: when(c.created_at) }),
        pending
          ? t("candidates.expires_at", { when: when(c.expires_at) })
          : t(`candidate_status.${c.status}`),
      ]),
    ),
    h(
      "p",
      { class: "hint source" },
      c.source_conversation_id
        ? [t("label.colon", { label: t("candidates.conversation") }), h("code", { class: "id" }, c.source_conversation_id)]
        : t("candidates.no_conversation"),
    ),
    c.target_memory_id && !state.targets[c.target_memory_id]?.gone
      ? h("p", {}, memoryLink(c.target_memory_id, t("candidates.open_target"), { class: "target-link" }))
      : null,
    pending && !editing ? actions(ctx, state, c, index) : null,
    pending && editing ? editForm(ctx, state, c, index) : null,
  );
}

/** The proposed value; for an update or replacement, beside the current value it would replace. */
function proposal(state, c) {
  const proposed = box(t("candidates.proposed"), c.proposed_content, c.proposed_category, "proposed");
  if (!c.target_memory_id || c.status !== "pending") return h("div", { class: "compare single" }, proposed);
  const found = state.targets[c.target_memory_id];
  if (!found) return h("div", { class: "compare single" }, proposed);
  if (found.gone) {
    return [
      h("p", { class: "notice" }, t(`candidates.target_${found.gone}`)),
      h("div", { class: "compare single" }, proposed),
    ];
  }
  const current = found.memory;
  const moved = c.expected_revision !== null && current.revision !== c.expected_revision;
  return [
    h(
      "div",
      { class: "compare" },
      box(t("candidates.current", { revision: current.revision }), current.content, current.category, "current"),
      proposed,
    ),
    moved
      ? h("p", { class: "notice" }, t("candidates.target_moved", { expected: c.expected_revision, revision: current.revision }))
      : null,
  ];
}

function box(label, content, category, kind) {
  return h(
    "div",
    { class: `version-box ${kind}` },
    h("h4", {}, label),
    h("p", { class: "content" }, content),
    h("p", { class: "hint" }, t(`category.${category}`)),
  );
}

function actions(ctx, state, c, index) {
  const named = (key) => t(key, { key: c.proposed_key });
  return h(
    "div",
    { class: "actions" },
    h(
      "button",
      {
        type: "button",
        "data-focus-key": `accept-${c.candidate_id}`,
        "aria-label": named("candidates.accept_named"),
        onClick: () => decide(ctx, state, c, index, "accept"),
      },
      t("candidates.accept"),
    ),
    h(
      "button",
      {
        type: "button",
        class: "secondary",
        "data-focus-key": `edit-${c.candidate_id}`,
        "aria-label": named("candidates.edit_named"),
        onClick: async () => {
          state.editing = c.candidate_id;
          await ctx.redraw(`edit-content-${c.candidate_id}`);
        },
      },
      t("candidates.edit"),
    ),
    h(
      "button",
      {
        type: "button",
        class: "danger",
        "data-focus-key": `reject-${c.candidate_id}`,
        "aria-label": named("candidates.reject_named"),
        onClick: () => decide(ctx, state, c, index, "reject"),
      },
      t("candidates.reject"),
    ),
  );
}

function editForm(ctx, state, c, index) {
  const content = h("textarea", {
    name: "content",
    rows: 3,
    required: true,
    maxlength: 4000,
    value: c.proposed_content,
    "data-focus-key": `edit-content-${c.candidate_id}`,
  });
  const category = select(options("category", CATEGORIES), c.proposed_category, { name: "category" });
  return h(
    "form",
    {
      class: "stack",
      "aria-label": t("candidates.edit_named", { key: c.proposed_key }),
      onSubmit: (event) => {
        event.preventDefault();
        const data = new FormData(event.target);
        const edits = { content: data.get("content"), category: data.get("category") };
        if (c.operation === "create") {
          edits.scope_type = data.get("scope_type");
          edits.workspace_type =
            edits.scope_type === "workspace" ? data.get("workspace_type") : null;
        }
        decide(ctx, state, c, index, "accept", edits);
      },
    },
    field(t("field.content"), content),
    field(t("field.category"), category),
    // An update or replacement changes an existing memory in its scope: only a new one has a choice.
    c.operation === "create" ? scopeFields(c.proposed_scope_type, c.proposed_workspace_type) : null,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit" }, t("candidates.accept_edited")),
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          onClick: async () => {
            state.editing = null;
            await ctx.redraw(`edit-${c.candidate_id}`);
          },
        },
        t("action.cancel"),
      ),
    ),
  );
}

async function decide(ctx, state, c, index, verdict, edits) {
  let message;
  try {
    if (verdict === "accept") {
      const { data } = await ctx.api.acceptCandidate(c.candidate_id, edits);
      message = t("candidates.accepted", { key: data.memory.memory_key, revision: data.memory.revision });
      if (ctx.lists.memories) ctx.lists.memories.loaded = false;
    } else {
      await ctx.api.rejectCandidate(c.candidate_id);
      message = t("candidates.rejected", { key: c.proposed_key });
    }
  } catch (error) {
    ctx.fail(error);
    return;
  }
  state.editing = null;
  state.loaded = false;
  await ctx.redraw(`cand-${c.candidate_id}-gone`);
  // Focus the candidate that took this one's place, else the heading.
  const next = state.items[Math.min(index, state.items.length - 1)];
  const target = next && document.getElementById(`cand-${next.candidate_id}`);
  if (target) target.focus();
  ctx.announce(message);
}
