// Hash routes: one URL per screen, so a reload, Back/Forward and a shared link land on it.
//
//   #/memories?q=…&scope_type=…   the list (its search and filters)
//   #/memories/<id>               one memory
//   #/memories/<id>/history       its version history
//   #/candidates?status=…         candidates
//   #/settings                    settings
//
// The page is always /console/ (the server needs no route of its own); the fragment never
// reaches the server.

export const MEMORY_QUERY = ["q", "scope_type", "workspace_type", "status", "category"];

/** {view, memoryId, query} from a location hash; anything unknown is the memory list. */
export function parseRoute(hash) {
  const text = (hash || "").replace(/^#/, "");
  const [path, search = ""] = text.split("?", 2);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(search);
  const query = Object.fromEntries([...params].filter(([, value]) => value !== ""));
  if (parts[0] === "memories" && parts[1]) {
    return { view: parts[2] === "history" ? "history" : "memory", memoryId: parts[1], query: {} };
  }
  if (parts[0] === "candidates") return { view: "candidates", memoryId: null, query: pick(query, ["status"]) };
  if (parts[0] === "settings") return { view: "settings", memoryId: null, query: {} };
  return { view: "memories", memoryId: null, query: pick(query, MEMORY_QUERY) };
}

/** The hash of a route: routeHash({view: "memory", memoryId}) -> "#/memories/<id>". */
export function routeHash({ view, memoryId = null, query = {} }) {
  const path = {
    memories: "/memories",
    memory: `/memories/${encodeURIComponent(memoryId)}`,
    history: `/memories/${encodeURIComponent(memoryId)}/history`,
    candidates: "/candidates",
    settings: "/settings",
  }[view];
  const search = new URLSearchParams(Object.entries(query).filter(([, v]) => v)).toString();
  return `#${path}${search ? `?${search}` : ""}`;
}

function pick(query, names) {
  return Object.fromEntries(names.filter((n) => query[n]).map((n) => [n, query[n]]));
}
