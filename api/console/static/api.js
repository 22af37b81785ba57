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
  settings() {
    return this.request("GET", "me/memory-settings");
  }
  changeSettings(body) {
    return this.request("PATCH", "me/memory-settings", { body });
  }
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
