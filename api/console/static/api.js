// The public HTTP API (API_CONTRACT.md), called from the console's own origin.

/** An answer other than 2xx: status, the API's `detail` string, its `reason`, the whole body. */
export class ApiError extends Error {
  constructor(status, body) {
    super(typeof body?.detail === "string" ? body.detail : `HTTP ${status}`);
    this.status = status;
    this.detail = this.message;
    this.reason = body?.reason ?? null;
    this.body = body ?? {};
  }
}

// The console is served at <root>/console/, so the API root is one level up.
const ROOT = new URL("../", window.location.href);

export class Api {
  constructor(token) {
    this.token = token;
  }

  async request(method, path, { body, query } = {}) {
    const url = new URL(path.replace(/^\//, ""), ROOT);
    for (const [name, value] of Object.entries(query || {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
    }
    const headers = { Authorization: `Bearer ${this.token}`, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
        credentials: "omit",
      });
    } catch {
      throw new ApiError(0, { detail: null, reason: "network" });
    }
    const text = await response.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = { detail: text.slice(0, 300) };
      }
    }
    if (!response.ok) throw new ApiError(response.status, data);
    return { status: response.status, data };
  }

  /** The list, or with `q` the owner's search (ordered by relevance), under the same filters. */
  listMemories(filters, cursor) {
    return this.request("GET", "me/core-memories", { query: { ...filters, cursor, limit: 50 } });
  }
  getMemory(id) {
    return this.request("GET", `me/core-memories/${encodeURIComponent(id)}`);
  }
  createMemory(body) {
    return this.request("POST", "me/core-memories", { body });
  }
  updateMemory(id, body) {
    return this.request("PATCH", `me/core-memories/${encodeURIComponent(id)}`, { body });
  }
  forgetMemory(id) {
    return this.request("DELETE", `me/core-memories/${encodeURIComponent(id)}`);
  }
  suppressMemory(id) {
    return this.request("POST", `me/core-memories/${encodeURIComponent(id)}/suppress`);
  }
  restoreMemory(id) {
    return this.request("POST", `me/core-memories/${encodeURIComponent(id)}/restore`);
  }
  versions(id) {
    return this.request("GET", `me/core-memories/${encodeURIComponent(id)}/versions`);
  }
  restoreVersion(id, revision, expectedRevision) {
    return this.request(
      "POST",
      `me/core-memories/${encodeURIComponent(id)}/versions/${Number(revision)}/restore`,
      { body: { expected_revision: expectedRevision } },
    );
  }
  candidates(status) {
    return this.request("GET", "me/memory-candidates", { query: { status } });
  }
  acceptCandidate(id, edits) {
    return this.request("POST", `me/memory-candidates/${encodeURIComponent(id)}/accept`, {
      body: edits || {},
    });
  }
  rejectCandidate(id) {
    return this.request("POST", `me/memory-candidates/${encodeURIComponent(id)}/reject`);
  }
  /** Which optional endpoints this server has (from its OpenAPI): {changes}. */
  async features() {
    try {
      const response = await fetch(new URL("openapi.json", ROOT), { cache: "no-store", credentials: "omit" });
      const paths = response.ok ? (await response.json()).paths || {} : {};
      return { changes: Boolean(paths["/me/changes"]?.get) };
    } catch {
      return { changes: false };
    }
  }
  /**
   * Follow GET /me/changes as Server-Sent Events, calling onChange(item) for each change, until
   * `signal` aborts; reconnects (with Last-Event-ID) after a drop. EventSource cannot send the
   * bearer token, so this reads the stream through fetch.
   */
  async followChanges(onChange, signal) {
    let lastId = null;
    while (!signal.aborted) {
      try {
        const headers = { Authorization: `Bearer ${this.token}`, Accept: "text/event-stream" };
        if (lastId) headers["Last-Event-ID"] = lastId;
        const response = await fetch(new URL("me/changes", ROOT), {
          headers, signal, cache: "no-store", credentials: "omit",
        });
        if (response.status === 401 || response.status === 403 || response.status === 404) return;
        if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value.replace(/\r\n?/g, "\n");
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const event = parseEvent(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
            if (event.id) lastId = event.id;
            if (event.data) {
              try {
                onChange(JSON.parse(event.data));
              } catch {
                // a malformed item is skipped; the next one still arrives
              }
            }
          }
        }
      } catch {
        if (signal.aborted) return;
      }
      await new Promise((resolve) => window.setTimeout(resolve, 3000));
    }
  }
  settings() {
    return this.request("GET", "me/memory-settings");
  }
  changeSettings(body) {
    return this.request("PATCH", "me/memory-settings", { body });
  }
}

/** One SSE event block: {id, event, data} (comment lines, the heartbeats, are ignored). */
function parseEvent(block) {
  const event = { id: null, event: "message", data: "" };
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (name === "id") event.id = value;
    else if (name === "event") event.event = value;
    else if (name === "data") data.push(value);
  }
  event.data = data.join("\n");
  return event;
}

/** The token's `sub`, for display only (the server is what verifies the token). */
export function tokenSubject(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const json = new TextDecoder().decode(Uint8Array.from(atob(part), (c) => c.charCodeAt(0)));
    const sub = JSON.parse(json).sub;
    return typeof sub === "string" ? sub : null;
  } catch {
    return null;
  }
}
