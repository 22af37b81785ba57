"""The scorers the reranker stage (retrieval/rerank.py) can use: `make_scorer(kind, ...)`.

- `HttpScorer`: a `/rerank` endpoint. `api="tei"` posts text-embeddings-inference's request,
  `{"query", "texts", "raw_scores", "truncate": true}`; `api="cohere"` posts the one Cohere,
  Jina, Infinity and vLLM take, `{"query", "documents", "top_n", "model"?}`. The answer's shape
  is recognised whichever was asked: a list of `{"index", "score"}` (TEI) or
  `{"results": [{"index", "relevance_score"}]}` (Cohere, Jina). The server is untrusted: its
  answer is read up to 1 MB within the timeout, every index must appear once, and the scores
  are checked (retrieval.rerank.to_relevance); anything else is a RerankError, and past the
  call's timeout (each read, and the whole answer) a RerankTimeout. Its calls keep their own
  time, so the stage makes them in the search's thread. Errors never name the URL (it may
  carry a key): /readyz shows them.
- `CrossEncoderScorer`: a local sentence-transformers CrossEncoder folder, loaded on first use
  (or at start-up: `Reranker.warm_up`). sentence-transformers is the optional `rerank` extra
  (`pip install 'memledger[rerank]'`), not a dependency.

Scores become relevance by `scores`: `probability` (the default: TEI without raw scores,
Cohere, Jina, and a one-label CrossEncoder, to which sentence-transformers applies its sigmoid)
is taken as it is; `logit` goes through a sigmoid (TEI is then asked for raw scores).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

import httpx2

from retrieval.rerank import RerankError, RerankTimeout, ScoreKind, Scorer, to_relevance

__all__ = ["MAX_ANSWER_BYTES", "RERANKERS", "CrossEncoderScorer", "HttpScorer", "make_scorer"]

RERANKERS: Final = ("off", "http", "cross-encoder")
MAX_ANSWER_BYTES: Final = 1 << 20
Api = Literal["tei", "cohere"]


class HttpScorer:
    """A `/rerank` endpoint (TEI, Cohere, Jina and alike); one pooled client, strict timeouts."""

    def __init__(
        self,
        url: str,
        *,
        api: Api = "tei",
        model: str | None = None,
        api_key: str | None = None,
        scores: ScoreKind = "probability",
        timeout: float = 0.3,
    ) -> None:
        self.url = url
        self.api = api
        self.model = model
        self.kind = scores
        self.timeout = timeout
        self.name = f"http/{model or api}"
        self.bounded = True
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx2.Client(
            headers=headers, timeout=httpx2.Timeout(timeout), follow_redirects=False
        )

    def warm_up(self) -> None:
        """Nothing to load (the endpoint is asked in searches only)."""

    def scores(self, query: str, documents: Sequence[str], timeout: float) -> list[float]:
        body: dict[str, Any]
        if self.api == "tei":
            body = {
                "query": query,
                "texts": list(documents),
                "raw_scores": self.kind == "logit",
                "truncate": True,
            }
        else:
            body = {"query": query, "documents": list(documents), "top_n": len(documents)}
            if self.model:
                body["model"] = self.model
        answer = self._post(body, min(timeout, self.timeout))
        return to_relevance(_in_order(answer, len(documents)), len(documents), self.kind)

    def _post(self, body: dict[str, Any], timeout: float) -> Any:
        until = time.monotonic() + timeout
        try:
            with self._client.stream(
                "POST", self.url, json=body, timeout=httpx2.Timeout(timeout)
            ) as response:
                if response.status_code != 200:
                    raise RerankError(f"the reranker answered HTTP {response.status_code}")
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > MAX_ANSWER_BYTES:
                        raise RerankError(f"the reranker answered more than {MAX_ANSWER_BYTES} B")
                    if time.monotonic() > until:  # a trickle: each read in time, the whole not
                        raise RerankTimeout(f"the reranker took longer than {timeout:g} s")
        except httpx2.TimeoutException:
            raise RerankTimeout(f"no answer within {timeout:g} s") from None
        except httpx2.HTTPError as error:
            raise RerankError(f"the reranker failed: {type(error).__name__}") from None
        try:
            return json.loads(data)
        except ValueError:
            raise RerankError("the reranker answered no JSON") from None


def _in_order(answer: Any, count: int) -> list[Any]:
    """The scores of a TEI or Cohere/Jina answer, by document index; RerankError if malformed."""
    if isinstance(answer, dict) and isinstance(answer.get("results"), list):
        items, field = answer["results"], "relevance_score"
    elif isinstance(answer, list):
        items, field = answer, "score"
    else:
        raise RerankError("the answer is neither a list of scores nor {results: [...]}")
    found: dict[int, Any] = {}
    for item in items:
        index = item.get("index") if isinstance(item, dict) else None
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise RerankError("an answer item has no valid index")
        if index in found or field not in item:
            raise RerankError(f"index {index} repeated or without {field}")
        found[index] = item[field]
    if len(found) != count:
        raise RerankError(f"{len(found)} scores for {count} documents")
    return [found[i] for i in range(count)]


class CrossEncoderScorer:
    """A local sentence-transformers CrossEncoder (a folder with its config and weights)."""

    def __init__(self, folder: Path, *, scores: ScoreKind = "probability") -> None:
        self.folder = folder
        self.kind = scores
        self.name = f"cross-encoder/{folder.name}"
        self.bounded = False  # a prediction cannot be interrupted
        self._model: Any = None
        self._lock = threading.Lock()  # one prediction at a time; the model is not shared

    def warm_up(self) -> None:
        with self._lock:
            self._loaded()

    def _loaded(self) -> Any:
        if self._model is None:
            if not self.folder.is_dir():
                raise RerankError(f"no cross-encoder model folder at {self.folder}")
            try:
                from sentence_transformers import CrossEncoder
            except ImportError:
                raise RerankError(
                    "sentence-transformers is not installed: pip install 'memledger[rerank]'"
                ) from None
            try:
                self._model = CrossEncoder(str(self.folder), device="cpu")
            except Exception as error:
                raise RerankError(f"the model in {self.folder} did not load: {error}") from None
        return self._model

    def scores(self, query: str, documents: Sequence[str], timeout: float) -> list[float]:
        with self._lock:
            model = self._loaded()
            try:
                raw = model.predict(
                    [(query, d) for d in documents], convert_to_numpy=True, show_progress_bar=False
                )
            except Exception as error:
                raise RerankError(f"{self.name} failed: {type(error).__name__}") from None
        flat = raw.reshape(-1).tolist() if hasattr(raw, "reshape") else list(raw)
        return to_relevance(flat, len(documents), self.kind)


def make_scorer(
    kind: str,
    *,
    url: str | None = None,
    api: Api = "tei",
    model: str | None = None,
    api_key: str | None = None,
    scores: ScoreKind = "probability",
    timeout: float = 0.3,
) -> Scorer | None:
    """The scorer a configuration names (nothing loaded yet), or None for `off`."""
    if kind == "off":
        return None
    if kind == "http":
        if not url:
            raise ValueError("an http reranker needs the URL of its /rerank endpoint")
        return HttpScorer(
            url, api=api, model=model, api_key=api_key, scores=scores, timeout=timeout
        )
    if kind == "cross-encoder":
        if not model:
            raise ValueError("a cross-encoder reranker needs a model folder")
        return CrossEncoderScorer(Path(model), scores=scores)
    raise ValueError(f"unknown reranker {kind!r}; known: {', '.join(RERANKERS)}")
