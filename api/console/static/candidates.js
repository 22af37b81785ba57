// Candidates the agents proposed: accept, edit and accept, or reject (pending ones); browse others.

import { field, h, mount, select } from "./dom.js";
import { t, when } from "./i18n.js";
import { CATEGORIES, options, scopeFields, scopeText } from "./parts.js";

const STATUSES = ["pending", "accepted", "rejected", "expired"];

function listState(ctx) {
  ctx.lists.candidates ||= { status: "pending", items: [], editing: null, loaded: false };
  return ctx.lists.candidates;
}

async function load(ctx, state) {
  state.items = (await ctx.api.candidates(state.status)).data.items;
  state.loaded = true;
}

export async function renderCandidates(ctx, main) {
  const state = listState(ctx);
  if (!state.loaded) {
    try {
      await load(ctx, state);
    } catch (error) {
      ctx.fail(error);
    }
  }
  const status = select(options("candidate_status", STATUSES), state.status, { name: "status" });
  const filter = h(
    "form",
    {
      class: "filters card row",
      "aria-label": t("candidates.filter"),
      onSubmit: async (event) => {
        event.preventDefault();
        state.status = status.value;
        state.editing = null;
        state.loaded = false;
        await ctx.go("candidates", { focus: "show-candidates" });
        ctx.announce(t("candidates.count", { count: state.items.length }));
      },
    },
    field(t("candidates.status"), status),
    h("button", { type: "submit", "data-focus-key": "show-candidates" }, t("candidates.show")),
  );
  mount(main,
    h("h2", {}, t("candidates.heading")),
    h("p", { class: "hint" }, t("candidates.intro")),
    filter,
    h("p", { class: "count" }, t("candidates.count", { count: state.items.length })),
    state.items.length
      ? h("ul", { class: "candidates" }, state.items.map((c, i) => card(ctx, state, c, i)))
      : h("p", { class: "empty" }, t("candidates.empty")),
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
      { id: headingId, tabindex: "-1" },
      h("span", { class: "key" }, c.proposed_key),
      " ",
      h("span", { class: `badge op-${c.operation}` }, t(`operation.${c.operation}`)),
    ),
    h("p", { class: "content" }, c.proposed_content),
    h(
      "p",
      { class: "hint" },
      [
        t(`category.${c.proposed_category}`),
        scopeText(c.proposed_scope_type, c.proposed_workspace_type),
        t("candidates.proposed_at", { when: when(c.created_at) }),
        pending
          ? t("candidates.expires_at", { when: when(c.expires_at) })
          : t(`candidate_status.${c.status}`),
      ].join(" · "),
    ),
    c.target_memory_id
      ? h(
          "p",
          {},
          h(
            "button",
            {
              type: "button",
              class: "link",
              onClick: () => ctx.go("detail", { memoryId: c.target_memory_id }),
            },
            t("candidates.open_target"),
          ),
        )
      : null,
    pending && !editing ? actions(ctx, state, c, index) : null,
    pending && editing ? editForm(ctx, state, c, index) : null,
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
          await ctx.go("candidates", { focus: `edit-content-${c.candidate_id}` });
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
            await ctx.go("candidates", { focus: `edit-${c.candidate_id}` });
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
  await ctx.go("candidates");
  // Focus the candidate that took this one's place, else the heading.
  const next = state.items[Math.min(index, state.items.length - 1)];
  const target = next && document.getElementById(`cand-${next.candidate_id}`);
  if (target) target.focus();
  ctx.announce(message);
}
